package discover

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rackpool/internal/topology"
)

// diskGetter reads a DMTF mockup directory the way sushy-static serves it:
// path P is P/index.json under the directory.
func diskGetter(dir string) Getter {
	return func(_ context.Context, path string) ([]byte, error) {
		rel := strings.TrimPrefix(strings.TrimPrefix(path, ServiceRoot), "/")
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel), "index.json"))
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%w (no file)", ErrNotFound)
		}
		return b, err
	}
}

// TestMockupFiles walks the DMTF mockups straight from their files (no
// server): the same checks as TestMockups where sushy-static is missing,
// and the same Result over both transports where it is not.
func TestMockupFiles(t *testing.T) {
	mockups := mockupsDir(t)
	for _, m := range []string{"public-cxl", "public-cxl-multiswitch", "public-expansion-box", "public-sasfabric", "public-nvmeof-jbof"} {
		t.Run(m, func(t *testing.T) {
			dir := filepath.Join(mockups, m)
			r, err := Walk(context.Background(), diskGetter(dir), Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstDisk(t, disk{t, dir}, r)
			if d, err := r.Topology(TopologyOptions{}); err == nil {
				y, err := d.YAML()
				if err != nil {
					t.Fatal(err)
				}
				top, err := topology.Parse(m+".yaml", y)
				if err != nil {
					t.Fatalf("%v\n%s", err, y)
				}
				checkConvention(t, r, top)
			}
		})
	}
}
