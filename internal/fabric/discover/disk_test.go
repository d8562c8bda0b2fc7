package discover

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
