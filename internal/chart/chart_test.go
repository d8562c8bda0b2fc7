package chart

import (
	"math"
	"rackpool/internal/chart/charttest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
)

var svgPathD = regexp.MustCompile(`<path d="([^"]*)"\s*style="([^"]*)"`)

// testSeriesPaths returns the vertex count of every stroked path in colour
// (vgsvg's "#RRGGBB"), in order. A series' line is one path unless it is
// clipped.
func testSeriesPaths(doc, colour string) []int {
	var out []int
	for _, m := range svgPathD.FindAllStringSubmatch(doc, -1) {
		if strings.Contains(m[2], "stroke:"+colour) && !strings.Contains(m[1], "A") {
			out = append(out, strings.Count(m[1], "M")+strings.Count(m[1], "L"))
		}
	}
	return out
}

// testFilledPaths counts the paths filled with colour.
func testFilledPaths(doc, colour string) int {
	n := 0
	for _, m := range svgPathD.FindAllStringSubmatch(doc, -1) {
		if strings.Contains(m[2], "fill:"+colour) {
			n++
		}
	}
	return n
}

func mustSVG(t *testing.T, c interface{ SVG() ([]byte, error) }) string {
	t.Helper()
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLineChartParsesAndNamesSeries(t *testing.T) {
	names := []string{"cores", `memory <"GB"> & 'more'`, "ünïcode ✓"}
	c := Line{Title: "Utilisation & <friends>", XLabel: "t < 5 (s)", YLabel: "used (%)"}
	for i, n := range names {
		var pts []Point
		for x := 0; x < 50; x++ {
			pts = append(pts, Point{float64(x), float64((x * (i + 1)) % 17)})
		}
		c.Series = append(c.Series, Series{Name: n, Points: pts})
	}
	doc := mustSVG(t, c)
	texts := charttest.Texts(charttest.Check(t, doc, false))
	for _, want := range append(names, c.Title, c.XLabel, c.YLabel) {
		if !texts[want] {
			t.Errorf("chart has no text %q", want)
		}
	}
	for i := range names {
		colour := strings.ToUpper(hexColour(i))
		// The line, and the legend's sample of it.
		paths := testSeriesPaths(doc, colour)
		if len(paths) != 2 || paths[0] != 50 || paths[1] != 2 {
			t.Errorf("series %d (%s): stroked paths with %v vertices, want [50 2] (line, legend)", i, colour, paths)
		}
	}
	if !strings.HasPrefix(doc, "<svg ") || !strings.Contains(doc, `font-family:Liberation Sans,Arial,Helvetica,sans-serif;`) ||
		strings.Contains(doc, "font-family:Liberation Sans;") {
		t.Errorf("document start or font stack:\n%.600s", doc)
	}
}

// hexColour is Colour(i) as "#rrggbb".
func hexColour(i int) string {
	r, g, b, _ := Colour(i).RGBA()
	return "#" + strconv.FormatInt(int64(0x1000000|(r>>8)<<16|(g>>8)<<8|b>>8), 16)[1:]
}

func TestChartsAreDeterministic(t *testing.T) {
	build := func() Line {
		c := Line{Title: "x", XLabel: "x (s)", YLabel: "y (m)", YFromZero: true}
		for s := 0; s < 12; s++ {
			var pts []Point
			for i := 0; i < 5000; i++ {
				pts = append(pts, Point{float64(i) * 0.37, math.Sin(float64(i*(s+1)) / 100)})
			}
			c.Series = append(c.Series, Series{Name: "s" + strconv.Itoa(s), Points: pts})
		}
		return c
	}
	a, b := mustSVG(t, build()), mustSVG(t, build())
	if a != b {
		t.Fatal("two renders of the same line chart differ")
	}
	bar := Bar{Labels: []string{"1", "2", "3"}, Values: []float64{0.5, 0.25, 0.25}}
	if b1, b2 := mustSVG(t, bar), mustSVG(t, bar); b1 != b2 {
		t.Fatal("two renders of the same bar chart differ")
	}
}

func TestChartsRenderConcurrently(t *testing.T) {
	c := Line{Title: "t", XLabel: "x (s)", YLabel: "y (m)", Series: []Series{
		{Name: "a", Points: []Point{{0, 1}, {1, 3}, {2, 2}}},
		{Name: "b", Points: []Point{{0, 2}, {1, 1}, {2, 4}}},
	}}
	want := mustSVG(t, c)
	var wg sync.WaitGroup
	got := make([]string, 8)
	errs := make([]error, len(got))
	for i := range got {
		wg.Go(func() {
			b, err := c.SVG()
			got[i], errs[i] = string(b), err
		})
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != want {
			t.Errorf("render %d in parallel: error %v, same bytes %v", i, errs[i], got[i] == want)
		}
	}
}

func TestLineChartDownsamplesLargeSeries(t *testing.T) {
	const n = 100_000
	pts := make([]Point, n)
	for i := range pts {
		pts[i] = Point{float64(i), float64((i * 7919) % 1000)}
	}
	pts[12345].Y = -500 // a lone dip and spike must survive thinning
	pts[67890].Y = 5000
	doc := mustSVG(t, Line{Series: []Series{{Name: "big", Points: pts}}})
	if !charttest.Texts(charttest.Check(t, doc, false))["big"] {
		t.Error("a lone series lost its name")
	}
	paths := testSeriesPaths(doc, strings.ToUpper(hexColour(0)))
	if len(paths) == 0 {
		t.Fatal("no line drawn")
	}
	if paths[0] > MaxPoints || paths[0] < MaxPoints/2 {
		t.Errorf("%d points drawn, want between %d and %d", paths[0], MaxPoints/2, MaxPoints)
	}
	if len(doc) > 100_000 {
		t.Errorf("SVG is %d bytes", len(doc))
	}

	xys := make(plotter.XYs, n)
	for i, p := range pts {
		xys[i] = plotter.XY{X: p.X, Y: p.Y}
	}
	thin := downsampleXYs(xys, MaxPoints)
	if len(thin) > MaxPoints {
		t.Fatalf("downsampleXYs kept %d points", len(thin))
	}
	if thin[0] != xys[0] || thin[len(thin)-1] != xys[n-1] {
		t.Error("downsampleXYs lost an end point")
	}
	var sawMin, sawMax bool
	for i, p := range thin {
		sawMin = sawMin || p == xys[12345]
		sawMax = sawMax || p == xys[67890]
		if i > 0 && p.X <= thin[i-1].X {
			t.Fatalf("downsampleXYs out of order at %d: %v after %v", i, p, thin[i-1])
		}
	}
	if !sawMin || !sawMax {
		t.Errorf("downsampleXYs lost the extremes: min %v max %v", sawMin, sawMax)
	}
	if got := downsampleXYs(xys[:10], MaxPoints); len(got) != 10 {
		t.Errorf("short series changed: %d points", len(got))
	}
}

func TestLineChartDegenerateInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		c      Line
		lines  int  // vertices of the first series' line; 0: none
		noData bool // "no data" written
	}{
		{"empty", Line{}, 0, true},
		{"no points", Line{Series: []Series{{Name: "a"}}}, 0, true},
		{"only NaN", Line{Series: []Series{{Name: "a", Points: []Point{{math.NaN(), math.NaN()}, {1, math.NaN()}}}}}, 0, true},
		{"one point", Line{Series: []Series{{Name: "a", Points: []Point{{1, 1}}}}}, 0, false},
		{"flat", Line{Series: []Series{{Name: "a", Points: []Point{{0, 0}, {1, 0}}}}, YFromZero: true}, 2, false},
		{"flat nonzero", Line{Series: []Series{{Name: "a", Points: []Point{{5, 7}, {5, 7}}}}}, 2, false},
		{"non-finite skipped", Line{Series: []Series{{Name: "a", Points: []Point{{math.NaN(), 1}, {1, math.Inf(1)}, {2, 3}, {3, math.Inf(-1)}, {4, 4}}}}}, 2, false},
		{"tiny", Line{Series: []Series{{Name: "a", Points: []Point{{0, 1e-9}, {1, 3e-9}}}}}, 2, false},
		{"huge", Line{Series: []Series{{Name: "a", Points: []Point{{0, 0}, {1e12, 3e9}}}}}, 2, false},
		{"fixed range", Line{Series: []Series{{Name: "a", Points: []Point{{0, 5}, {1, 95}}}}, YFixed: true, YMax: 100}, 2, false},
		{"log x drops x <= 0", Line{XLog: true, Series: []Series{{Name: "a", Points: []Point{{-1, 1}, {0, 2}, {10, 3}, {1e5, 4}}}}}, 2, false},
		{"log x, nothing positive", Line{XLog: true, Series: []Series{{Name: "a", Points: []Point{{0, 2}}}}}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := mustSVG(t, tc.c)
			texts := charttest.Texts(charttest.Check(t, doc, false))
			if strings.Contains(doc, "NaN") || strings.Contains(doc, "Inf") {
				t.Errorf("non-finite number in output:\n%s", doc)
			}
			if texts["no data"] != tc.noData {
				t.Errorf("\"no data\" written: %v, want %v", texts["no data"], tc.noData)
			}
			// The series' line, then the legend's sample of it.
			var want []int
			if tc.lines > 0 {
				want = append(want, tc.lines)
			}
			if len(tc.c.Series) > 0 {
				want = append(want, 2)
			}
			if got := testSeriesPaths(doc, strings.ToUpper(hexColour(0))); !slices.Equal(got, want) {
				t.Errorf("stroked paths of %v vertices, want %v", got, want)
			}
		})
	}
}

func TestLineChartLogAxis(t *testing.T) {
	c := Line{Title: "cost", XLabel: "cards (log scale)", YLabel: "µs per decision", XLog: true,
		Series: []Series{{Name: "rackpool", Points: []Point{{1008, 14.4}, {12288, 21.4}, {98304, 28}}}}}
	texts := charttest.Texts(charttest.Check(t, mustSVG(t, c), false))
	for _, want := range []string{"1k", "10k", "100k", "cards (log scale)", "µs per decision", "rackpool"} {
		if !texts[want] {
			t.Errorf("log chart has no text %q", want)
		}
	}
}

func TestBarChartParses(t *testing.T) {
	c := Bar{Title: "hops", XLabel: "switch hops", YLabel: "share (%)", Labels: []string{"1", "2", "<3>"}, Values: []float64{62.5, 25, 12.5}, ValueSuffix: "%"}
	doc := mustSVG(t, c)
	texts := charttest.Texts(charttest.Check(t, doc, false))
	for _, want := range []string{"hops", "switch hops", "share (%)", "1", "2", "<3>", "62.5%", "25%", "12.5%"} {
		if !texts[want] {
			t.Errorf("bar chart has no text %q", want)
		}
	}
	bars := strings.ToUpper(hexColour(0))
	if got := testFilledPaths(doc, bars); got != 3 {
		t.Errorf("%d bars, want 3", got)
	}
	c.Values[1] = math.NaN()
	doc = mustSVG(t, c)
	if got := testFilledPaths(doc, bars); got != 2 {
		t.Errorf("with a NaN value: %d bars, want 2", got)
	}
	if strings.Contains(doc, "NaN") {
		t.Error("NaN written")
	}
	if !charttest.Texts(charttest.Check(t, mustSVG(t, Bar{Title: "none"}), false))["no data"] {
		t.Error("an empty bar chart does not say so")
	}
}

func TestTickLabels(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		log    bool
		want   string
	}{
		{0, 100, false, "0 20 40 60 80 100"},
		{0, 1, false, "0 0.2 0.4 0.6 0.8 1"},
		{0, 35, false, "0 5 10 15 20 25 30 35"},
		{0.4, 1.4, false, "0.4 0.6 0.8 1 1.2 1.4"},
		{0, 45000, false, "0 10k 20k 30k 40k"},
		{0, 1.6e6, false, "0 0.2M 0.4M 0.6M 0.8M 1M 1.2M 1.4M 1.6M"},
		{-7, 7, false, "-6 -4 -2 0 2 4 6"},
		{0.37, 0.41, false, "0.37 0.375 0.38 0.385 0.39 0.395 0.4 0.405 0.41"},
		{1000, 100000, true, "1k 10k 100k"},
		{0.1, 10, true, "0.1 1 10"},
	} {
		var labels []string
		for _, tk := range (readableTicks{log: tc.log}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != tc.want {
			t.Errorf("ticks over [%g, %g] (log %v): %q, want %q", tc.lo, tc.hi, tc.log, got, tc.want)
		}
	}
	// A widened range is labelled at both ends.
	for _, r := range [][2]float64{{0, 33.3}, {0.5, 1.25}, {0, 1499.5}, {0.5, 8.5}, {-3, 1e6 + 1}, {1e-9, 3e-9}} {
		lo, hi := RoundOut(r[0], r[1])
		ticks := readableTicks{}.Ticks(lo, hi)
		if lo > r[0] || hi < r[1] || len(ticks) < 2 || ticks[0].Value != lo || ticks[len(ticks)-1].Value != hi {
			t.Errorf("RoundOut(%g, %g) = [%g, %g], ticks %v", r[0], r[1], lo, hi, ticks)
		}
	}
}

func TestRenderSVG(t *testing.T) {
	if _, err := RenderSVG(100, 100, func(draw.Canvas) { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a panic while drawing: %v", err)
	}
	if _, err := RenderSVG(0, 100, func(draw.Canvas) {}); err == nil {
		t.Error("a chart of no width was drawn")
	}
	doc, err := RenderSVG(200, 100, func(c draw.Canvas) {
		p := NewPlot("title", "x (s)", "y (m)")
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
		l := NewLegend()
		l.Add("entry", &plotter.Line{LineStyle: seriesLineStyle(0)})
		drawWithLegend(c, p, &l)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), `width="200pt" height="100pt" viewBox="0 0 200 100"`) {
		t.Errorf("size not as asked:\n%.300s", doc)
	}
	texts := charttest.Texts(charttest.Check(t, string(doc), false))
	for _, want := range []string{"title", "x (s)", "y (m)", "entry"} {
		if !texts[want] {
			t.Errorf("no text %q", want)
		}
	}
}

func TestFormatSig(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		sig  int
		want string
	}{
		{0, 3, "0"},
		{1234.5678, 3, "1230"},
		{0.123456789, 3, "0.123"},
		{0.1 + 0.2, 6, "0.3"},
		{-2.5, 3, "-2.5"},
		{1e-9, 3, "1e-09"},
		{99.96, 3, "100"},
	} {
		if got := FormatSig(tc.v, tc.sig); got != tc.want {
			t.Errorf("FormatSig(%v, %d) = %q, want %q", tc.v, tc.sig, got, tc.want)
		}
	}
}
