package inventory

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasADocComment walks the module and fails for any
// package none of whose files carries a package comment.
func TestEveryPackageHasADocComment(t *testing.T) {
	root := filepath.Join("..", "..")
	documented := map[string]bool{} // "dir (package)" -> has a package comment
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
		documented[key] = documented[key] || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(documented) < 10 {
		t.Fatalf("found only %d packages; is the walk rooted right?", len(documented))
	}
	for pkg, ok := range documented {
		if !ok {
			t.Errorf("package %s has no package comment", pkg)
		}
	}
}
