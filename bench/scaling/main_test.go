package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testTable is a table as main prints it (and docs/benchmarks.md holds
// it), with text around it.
const testTable = `# placement cost against pod size

2026-11-20, 2 CPUs

` + tableHeader + `
|---|---|---|---|---|---|---|---|---|
| rackpool | 42 | 1,008 | 8,400 | 96.10% | 14.4 | 0.12 | 0.16 | 0.02 GiB |
| rackpool | 4096 | 98304 | 819200 | 99.18% | 28.0 | 22.90 | 24.97 | 0.74 GiB |
| first-fit | 42 | 1,008 | 8,400 | 96.61% | 9.5 | 0.08 | 0.11 | 0.02 GiB |
| first-fit | 4,096 | 98,304 | 819,200 | 99.44% | 11.9 | 9.73 | 11.75 | 0.75 GiB |

![decision time against pod size](scaling-decision.svg)
`

func TestReplotFromTable(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "table.md")
	if err := os.WriteFile(src, []byte(testTable), 0o644); err != nil {
		t.Fatal(err)
	}
	points, err := readTable(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 4 {
		t.Fatalf("%d points, want 4", len(points))
	}
	want := point{trays: 4096, cards: 98304, policy: "first-fit", requests: 819200, accepted: 814612, wall: 9.73, total: 11.75, usPerDecision: 11.9, rssGiB: 0.75}
	if points[3] != want {
		t.Errorf("last point\n %+v\nwant\n %+v", points[3], want)
	}
	if err := writeCharts(dir, points); err != nil {
		t.Fatal(err)
	}
	for file, texts := range map[string][]string{
		"scaling-decision.svg": {"time per decision (µs)", "cards (log scale)", "rackpool", "first-fit", ">1k<", ">100k<"},
		"scaling-rss.svg":      {"peak RSS (GiB)", "cards (log scale)", "rackpool", "first-fit"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range texts {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
	}

	for name, bad := range map[string]string{
		"no table":   "# nothing here\n",
		"no rows":    tableHeader + "\n|---|\n\ntext\n",
		"bad number": tableHeader + "\n|---|\n| rackpool | x | 1 | 1 | 1% | 1 | 1 | 1 | 1 GiB |\n",
		"short row":  tableHeader + "\n|---|\n| rackpool | 1 | 1 |\n",
	} {
		if err := os.WriteFile(src, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readTable(src); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}
