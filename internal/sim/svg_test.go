package sim

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// parseTestSVG walks every token of doc with encoding/xml and returns the text
// of its elements, failing the test on malformed XML or a root other than
// svg.
func parseTestSVG(t *testing.T, doc string) string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	var text strings.Builder
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse as XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
				if tok.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q", tok.Name.Space)
				}
			}
		case xml.CharData:
			text.Write(tok)
			text.WriteByte('\n')
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return text.String()
}

func TestLineChartParsesAndNamesSeries(t *testing.T) {
	names := []string{"cores", `memory <"GB"> & 'more'`, "ünïcode ✓"}
	c := LineChart{Title: "Utilisation & <friends>", XLabel: "t < 5", YLabel: "%"}
	for i, n := range names {
		var pts []ChartPoint
		for x := 0; x < 50; x++ {
			pts = append(pts, ChartPoint{float64(x), float64((x * (i + 1)) % 17)})
		}
		c.Series = append(c.Series, ChartSeries{Name: n, Points: pts})
	}
	doc := c.SVG()
	text := parseTestSVG(t, doc)
	for _, want := range append(names, c.Title, c.XLabel, c.YLabel) {
		if !strings.Contains(text, want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
	if got := strings.Count(doc, "<polyline"); got != len(names) {
		t.Errorf("%d polylines, want %d", got, len(names))
	}
}

func TestLineChartDeterministic(t *testing.T) {
	build := func() LineChart {
		c := LineChart{Title: "x", YFromZero: true}
		for s := 0; s < 12; s++ {
			var pts []ChartPoint
			for i := 0; i < 5000; i++ {
				pts = append(pts, ChartPoint{float64(i) * 0.37, math.Sin(float64(i*(s+1)) / 100)})
			}
			c.Series = append(c.Series, ChartSeries{Name: "s" + strconv.Itoa(s), Points: pts})
		}
		return c
	}
	a, b := build().SVG(), build().SVG()
	if a != b {
		t.Fatal("two renders of the same chart differ")
	}
	bar := BarChart{Labels: []string{"1", "2", "3"}, Values: []float64{0.5, 0.25, 0.25}}
	if b1, b2 := bar.SVG(), bar.SVG(); b1 != b2 {
		t.Fatal("two renders of the same bar chart differ")
	}
}

var svgPointsAttr = regexp.MustCompile(` points="([^"]*)"`)

func TestLineChartDownsamplesLargeSeries(t *testing.T) {
	const n = 100_000
	pts := make([]ChartPoint, n)
	for i := range pts {
		pts[i] = ChartPoint{float64(i), float64((i * 7919) % 1000)}
	}
	pts[12345].Y = -500 // a lone dip and spike must survive thinning
	pts[67890].Y = 5000
	doc := LineChart{Series: []ChartSeries{{Name: "big", Points: pts}}}.SVG()
	if !strings.Contains(parseTestSVG(t, doc), "big") {
		t.Error("a lone series lost its name")
	}
	m := svgPointsAttr.FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("no polyline")
	}
	drawn := strings.Fields(m[1])
	if len(drawn) > MaxChartPoints {
		t.Errorf("%d points drawn, want at most %d", len(drawn), MaxChartPoints)
	}
	if len(drawn) < MaxChartPoints/2 {
		t.Errorf("only %d points drawn: thinned more than needed", len(drawn))
	}
	if len(doc) > 100_000 {
		t.Errorf("SVG is %d bytes", len(doc))
	}

	thin := downsamplePoints(pts, MaxChartPoints)
	if len(thin) > MaxChartPoints {
		t.Fatalf("downsamplePoints kept %d points", len(thin))
	}
	if thin[0] != pts[0] || thin[len(thin)-1] != pts[n-1] {
		t.Error("downsamplePoints lost an end point")
	}
	var sawMin, sawMax bool
	for i, p := range thin {
		sawMin = sawMin || p == pts[12345]
		sawMax = sawMax || p == pts[67890]
		if i > 0 && p.X <= thin[i-1].X {
			t.Fatalf("downsamplePoints out of order at %d: %v after %v", i, p, thin[i-1])
		}
	}
	if !sawMin || !sawMax {
		t.Errorf("downsamplePoints lost the extremes: min %v max %v", sawMin, sawMax)
	}
	short := pts[:10]
	if got := downsamplePoints(short, MaxChartPoints); len(got) != 10 {
		t.Errorf("short series changed: %d points", len(got))
	}
}

func TestLineChartDegenerateInput(t *testing.T) {
	for name, c := range map[string]LineChart{
		"empty":       {},
		"no points":   {Series: []ChartSeries{{Name: "a"}}},
		"one point":   {Series: []ChartSeries{{Name: "a", Points: []ChartPoint{{1, 1}}}}},
		"flat":        {Series: []ChartSeries{{Name: "a", Points: []ChartPoint{{0, 0}, {1, 0}}}}, YFromZero: true},
		"non-finite":  {Series: []ChartSeries{{Name: "a", Points: []ChartPoint{{math.NaN(), 1}, {1, math.Inf(1)}, {2, 3}, {3, 4}}}}},
		"tiny":        {Series: []ChartSeries{{Name: "a", Points: []ChartPoint{{0, 1e-9}, {1, 3e-9}}}}},
		"huge":        {Series: []ChartSeries{{Name: "a", Points: []ChartPoint{{0, 0}, {1e12, 3e9}}}}},
		"fixed range": {Series: []ChartSeries{{Name: "a", Points: []ChartPoint{{0, -5}, {1, 150}}}}, YFixed: true, YMax: 100},
	} {
		t.Run(name, func(t *testing.T) {
			doc := c.SVG()
			parseTestSVG(t, doc)
			if strings.Contains(doc, "NaN") || strings.Contains(doc, "Inf") {
				t.Errorf("non-finite number in output:\n%s", doc)
			}
		})
	}
}

func TestBarChartParses(t *testing.T) {
	c := BarChart{Title: "hops", Labels: []string{"1", "2", "<3>"}, Values: []float64{62.5, 25, 12.5}, ValueSuffix: "%"}
	doc := c.SVG()
	text := parseTestSVG(t, doc)
	for _, want := range []string{"hops", "<3>", "62.5%", "12.5%"} {
		if !strings.Contains(text, want) {
			t.Errorf("bar chart text lacks %q", want)
		}
	}
	if got := strings.Count(doc, "<rect"); got != 4 { // background + 3 bars
		t.Errorf("%d rects, want 4", got)
	}
	parseTestSVG(t, BarChart{}.SVG())
}

func TestAxisTicksAreRound(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		n      int
		fixed  bool
		want   string
	}{
		{0, 100, 5, true, "0 20 40 60 80 100"},
		{0, 1, 5, true, "0 0.2 0.4 0.6 0.8 1"},
		{0, 0.3, 3, false, "0 0.1 0.2 0.3"},
		{3, 97, 4, false, "0 20 40 60 80 100"},
		{0, 1.5e6, 3, false, "0 0.5M 1M 1.5M"},
		{0, 45000, 4, false, "0 10k 20k 30k 40k 50k"},
		{-7, 7, 4, false, "-10 -5 0 5 10"},
	} {
		var a chartAxis
		if tc.fixed {
			a = fixedAxis(tc.lo, tc.hi, tc.n)
		} else {
			a = autoAxis(tc.lo, tc.hi, tc.n, false)
		}
		if got := strings.Join(a.labels, " "); got != tc.want {
			t.Errorf("chartAxis [%g, %g]/%d: ticks %q, want %q", tc.lo, tc.hi, tc.n, got, tc.want)
		}
	}
}

func TestFmtSig(t *testing.T) {
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
		if got := formatSig(tc.v, tc.sig); got != tc.want {
			t.Errorf("formatSig(%v, %d) = %q, want %q", tc.v, tc.sig, got, tc.want)
		}
	}
	if got := formatCoord(-0.01); got != "0" {
		t.Errorf("formatCoord(-0.01) = %q", got)
	}
}
