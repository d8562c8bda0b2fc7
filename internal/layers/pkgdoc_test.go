package layers

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasOneDocComment walks the module and fails for any
// package whose files carry no package comment, or more than one (go doc
// would show them run together, in file order).
func TestEveryPackageHasOneDocComment(t *testing.T) {
	root := filepath.Join("..", "..")
	documented := map[string][]string{} // "dir (package)" -> the files with a package comment
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "data" || d.Name() == "bin") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		key := filepath.Dir(path) + " (" + f.Name.Name + ")"
		if _, ok := documented[key]; !ok {
			documented[key] = nil
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			documented[key] = append(documented[key], filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(documented) < 10 {
		t.Fatalf("found only %d packages; is the walk rooted right?", len(documented))
	}
	for pkg, files := range documented {
		switch len(files) {
		case 0:
			t.Errorf("package %s has no package comment", pkg)
		case 1:
		default:
			t.Errorf("package %s has a package comment in each of %s: keep one (doc.go, or the package's main file)", pkg, strings.Join(files, ", "))
		}
	}
}
