// Package chart draws the simulator's and the benchmarks' charts with
// gonum.org/v1/plot: line charts
// of named (x, y) series and categorical bar charts, described by
// Line and Bar, laid out and drawn by gonum/plot and written as
// SVG by its vgsvg backend. RenderSVG and NewPlot are exported so that the
// benchmarks draw their own charts the same way.
//
// What vgsvg writes, and what RenderSVG makes of it:
//   - every style is an inline style attribute; there are no ids, no
//     classes and no <style> element (fonts are not embedded), so several
//     charts inline into one HTML page without clashing;
//   - text names its font by family, "Liberation Sans" (the font gonum
//     measures text with); RenderSVG appends Arial, Helvetica and
//     sans-serif, which have the same metrics, for viewers without it. No
//     font or anything else is fetched;
//   - numbers are printed to five significant digits and nothing depends
//     on maps, time or randomness, so the same chart is the same bytes
//     every time;
//   - the XML declaration and the generator comment before <svg> are cut,
//     so the document inlines into HTML as it is.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Point is one (x, y) point of a line chart series.
type Point struct {
	X, Y float64
}

// Series is one line of a Line, named in the legend unless Name
// is empty. Its points are joined in the order given (a time series is
// already in x order); points with a NaN or infinite coordinate, or on a
// logarithmic x axis a non-positive x, are left out.
type Series struct {
	Name   string
	Points []Point
}

// Line is a chart of one or more named series against shared axes.
// The axis labels should name their units.
type Line struct {
	Title  string
	XLabel string
	YLabel string
	Series []Series
	// XLog draws the x axis on a logarithmic scale, from the power of ten
	// at or below the smallest x to the one at or above the largest.
	XLog bool
	// YFixed pins the y axis to [YMin, YMax]; what lies outside is
	// clipped. Otherwise the axis spans the data, and starts at zero when
	// YFromZero is set and no value is negative.
	YFixed    bool
	YMin      float64
	YMax      float64
	YFromZero bool
	// Width and Height are the picture's size in points (1/72 inch); 0
	// means 720×360. The height grows when the legend needs more room.
	Width  vg.Length
	Height vg.Length
}

// Bar is a chart of one bar per category, in the order given.
type Bar struct {
	Title  string
	XLabel string
	YLabel string
	Labels []string
	// Values are the bars' heights; a NaN or infinite one draws no bar.
	Values []float64
	// YMax pins the top of the y axis when positive; otherwise the axis
	// spans zero to the largest value.
	YMax float64
	// ValueSuffix is appended to the value printed above each bar ("%").
	ValueSuffix string
	// Width and Height are the picture's size in points; 0 means 720×360.
	Width  vg.Length
	Height vg.Length
}

// MaxPoints bounds the points a line chart draws per series. Longer
// series are thinned by downsamplePoints, which keeps the shape (each
// bucket's lowest and highest point) and both ends.
const MaxPoints = 2000

// maxMarkedPoints is the most points a series may have and still get a
// marker on each: a sweep's measured points stand out from the lines
// drawn between them, a time series stays a line.
const maxMarkedPoints = 40

const (
	defaultChartWidth  = 720
	defaultChartHeight = 360
	maxLegendRunes     = 40
)

// chartPalette is the Tableau 10 palette; series beyond ten reuse it with
// a dash pattern, so that no two lines look alike until the thirtieth.
var chartPalette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

var chartDashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}

var (
	chartGridColour = color.Gray{0xe6}
	chartTextColour = color.Gray{0x33}
	chartNoteColour = color.Gray{0x88}
)

// Colour returns the colour of the i-th series of a chart.
func Colour(i int) color.Color {
	return chartPalette[i%len(chartPalette)]
}

// seriesLineStyle returns the line style of the i-th series.
func seriesLineStyle(i int) draw.LineStyle {
	return draw.LineStyle{
		Color:  Colour(i),
		Width:  vg.Points(1.6),
		Dashes: chartDashes[(i/len(chartPalette))%len(chartDashes)],
	}
}

// Font is the face every chart's text is set in, at size points.
func Font(size vg.Length, bold bool) font.Font {
	f := font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
	if bold {
		f.Weight = xfont.WeightBold
	}
	return f
}

// Text is the style of a chart's ordinary text at size points.
func Text(size vg.Length) text.Style {
	return text.Style{Color: chartTextColour, Font: Font(size, false), Handler: plot.DefaultTextHandler}
}

// NewPlot returns a gonum plot in the style of every rackpool chart: the
// title, axis labels (which should name their units) and tick labels set,
// a light grid behind the data, and tick labels with k, M and G suffixes.
func NewPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = nil // RenderSVG paints the whole picture white
	p.Title.Text = title
	p.Title.TextStyle.Font = Font(13, true)
	p.Title.TextStyle.Color = chartTextColour
	p.Title.Padding = vg.Points(10)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = Font(11, false)
		a.Label.TextStyle.Color = chartTextColour
		a.Label.Padding = vg.Points(4)
		a.Tick.Label.Font = Font(10, false)
		a.Tick.Label.Color = chartTextColour
		a.Tick.Length = vg.Points(5)
		a.Tick.Marker = readableTicks{}
	}
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = chartGridColour, chartGridColour
	grid.Vertical.Width, grid.Horizontal.Width = vg.Points(0.6), vg.Points(0.6)
	p.Add(grid)
	return p
}

// NewLegend returns a legend in the charts' style, entries top down
// from its canvas's top left, to be drawn beside a plot rather than over
// its data (plot.Plot's own legend sits on the data).
func NewLegend() plot.Legend {
	l := plot.NewLegend()
	l.TextStyle = Text(10)
	l.Top, l.Left = true, true
	l.Padding = vg.Points(3)
	l.ThumbnailWidth = vg.Points(22)
	return l
}

// legendSize returns the space a legend takes, zero when it is empty.
func legendSize(l *plot.Legend) (w, h vg.Length) {
	r := l.Rectangle(draw.Canvas{})
	return r.Size().X, r.Size().Y
}

// legendGap is the space between a plot and the legend to its right.
const legendGap = vg.Length(14)

// drawWithLegend draws p into dc with the legend, when it has entries, in
// a column at the right, level with the top of the plot's data. The column
// is a sixth wider than the legend needs in Liberation Sans, for viewers
// that fall back to a wider face.
func drawWithLegend(dc draw.Canvas, p *plot.Plot, l *plot.Legend) {
	lw, _ := legendSize(l)
	if lw == 0 {
		p.Draw(dc)
		return
	}
	lw = lw * 7 / 6
	plotC := draw.Crop(dc, 0, -(lw + 2*legendGap), 0, 0)
	p.Draw(plotC)
	top := p.DataCanvas(plotC).Max.Y
	l.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: plotC.Max.X + legendGap, Y: dc.Min.Y},
		Max: vg.Point{X: dc.Max.X, Y: top},
	}})
}

// RenderSVG draws a picture of width × height points with fn and returns
// it as a standalone SVG document (see the top of this file for what it
// holds), on a white background. A panic inside gonum/plot while drawing is
// returned as an error.
func RenderSVG(width, height vg.Length, fn func(draw.Canvas)) (svg []byte, err error) {
	if !(width > 0 && height > 0) {
		return nil, fmt.Errorf("sim: chart size %v × %v points", width, height)
	}
	c := vgsvg.New(width, height)
	defer func() {
		if r := recover(); r != nil {
			svg, err = nil, fmt.Errorf("sim: draw chart: %v", r)
		}
	}()
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	fn(dc)
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("sim: write chart: %w", err)
	}
	out := b.Bytes()
	start := bytes.Index(out, []byte("<svg"))
	if start < 0 {
		return nil, errors.New("sim: write chart: vgsvg wrote no <svg> element")
	}
	out = bytes.ReplaceAll(out[start:], []byte("font-family:Liberation Sans;"), []byte("font-family:Liberation Sans,Arial,Helvetica,sans-serif;"))
	return out, nil
}

// chartSize applies the default size.
func chartSize(w, h vg.Length) (vg.Length, vg.Length) {
	if w <= 0 {
		w = defaultChartWidth
	}
	if h <= 0 {
		h = defaultChartHeight
	}
	// Leave the plot some room whatever was asked for.
	return max(w, 240), max(h, 160)
}

// SVG renders the chart as a standalone SVG document.
func (c Line) SVG() ([]byte, error) {
	width, height := chartSize(c.Width, c.Height)
	p := NewPlot(c.Title, c.XLabel, c.YLabel)
	legend := NewLegend()

	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for i, s := range c.Series {
		xys := make(plotter.XYs, 0, len(s.Points))
		for _, pt := range s.Points {
			if !isFinite(pt.X) || !isFinite(pt.Y) || (c.XLog && pt.X <= 0) {
				continue
			}
			xys = append(xys, plotter.XY{X: pt.X, Y: pt.Y})
			xlo, xhi = math.Min(xlo, pt.X), math.Max(xhi, pt.X)
			ylo, yhi = math.Min(ylo, pt.Y), math.Max(yhi, pt.Y)
		}
		marked := len(xys) <= maxMarkedPoints
		xys = downsampleXYs(xys, MaxPoints)
		line := &plotter.Line{XYs: xys, LineStyle: seriesLineStyle(i)}
		dots := &plotter.Scatter{XYs: xys, GlyphStyle: draw.GlyphStyle{Color: Colour(i), Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}}
		if len(xys) > 1 {
			p.Add(line)
		}
		if len(xys) > 0 && marked {
			p.Add(dots)
		}
		if s.Name != "" {
			thumbs := []plot.Thumbnailer{line}
			if marked {
				thumbs = append(thumbs, dots)
			}
			legend.Add(truncateRunes(s.Name, maxLegendRunes), thumbs...)
		}
	}
	hasData := xlo <= xhi
	if !hasData {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
		if c.XLog {
			xlo, xhi = 1, 10
		}
		p.Add(chartNote("no data"))
	}

	if c.XLog {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = readableTicks{log: true}
		xlo, xhi = math.Pow(10, math.Floor(math.Log10(xlo))), math.Pow(10, math.Ceil(math.Log10(xhi)))
		if xlo == xhi {
			xhi *= 10
		}
	} else {
		if xlo == xhi {
			xlo, xhi = widen(xlo)
		}
		xlo, xhi = RoundOut(xlo, xhi)
	}
	p.X.Min, p.X.Max = xlo, xhi

	switch {
	case c.YFixed && c.YMax > c.YMin:
		ylo, yhi = c.YMin, c.YMax
	default:
		if c.YFromZero && ylo >= 0 {
			ylo = 0
		}
		if ylo == yhi {
			if ylo == 0 {
				yhi = 1
			} else {
				ylo, yhi = widen(ylo)
			}
		}
		ylo, yhi = RoundOut(ylo, yhi)
	}
	p.Y.Min, p.Y.Max = ylo, yhi

	_, lh := legendSize(&legend)
	height = max(height, lh+120)
	return RenderSVG(width, height, func(dc draw.Canvas) { drawWithLegend(dc, p, &legend) })
}

// widen returns a range around the single value v, a tenth of it (or 1
// when v is 0) either side.
func widen(v float64) (lo, hi float64) {
	d := math.Abs(v) * 0.1
	if d == 0 {
		d = 1
	}
	return v - d, v + d
}

// SVG renders the chart as a standalone SVG document.
func (c Bar) SVG() ([]byte, error) {
	width, height := chartSize(c.Width, c.Height)
	p := NewPlot(c.Title, c.XLabel, c.YLabel)
	n := min(len(c.Labels), len(c.Values))
	hi := 0.0
	if n == 0 {
		p.X.Min, p.X.Max = 0, 1
		p.Add(chartNote("no data"))
	} else {
		labels := make([]string, n)
		for i := range labels {
			labels[i] = truncateRunes(c.Labels[i], 16)
		}
		p.NominalX(labels...)
		p.X.Min, p.X.Max = -0.5, float64(n)-0.5
		// The bars fill about 70% of their slot, at most 60 points.
		barW := min(0.7*(width-90)/vg.Length(n), 60)
		for i, v := range c.Values[:n] {
			if !isFinite(v) {
				continue
			}
			hi = math.Max(hi, v)
			bar, err := plotter.NewBarChart(plotter.Values{v}, barW)
			if err != nil {
				return nil, fmt.Errorf("sim: bar chart: %w", err)
			}
			bar.XMin = float64(i)
			bar.Color = Colour(0)
			bar.LineStyle.Width = 0
			label := &plotter.Labels{
				XYs:       plotter.XYs{{X: float64(i), Y: v}},
				Labels:    []string{FormatSig(v, 3) + c.ValueSuffix},
				TextStyle: []text.Style{Text(10)},
				Offset:    vg.Point{Y: vg.Points(3)},
			}
			label.TextStyle[0].XAlign = draw.XCenter
			p.Add(bar, label)
		}
	}
	switch {
	case c.YMax > 0:
		p.Y.Min, p.Y.Max = 0, c.YMax
	case hi > 0:
		p.Y.Min, p.Y.Max = RoundOut(0, hi)
	default:
		p.Y.Min, p.Y.Max = 0, 1
	}
	return RenderSVG(width, height, p.Draw)
}

// chartNote is a plotter that writes a short note in the middle of the
// data area ("no data").
type chartNote string

func (n chartNote) Plot(c draw.Canvas, _ *plot.Plot) {
	sty := Text(12)
	sty.Color = chartNoteColour
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
	c.FillText(sty, c.Center(), string(n))
}

// maxTickIntervals bounds the labelled intervals of a linear axis.
const maxTickIntervals = 8

// readableTicks places ticks at round steps (1, 2 or 5 × 10^k, the finest
// that splits the axis into at most maxTickIntervals), or on a log axis at
// powers of ten with unlabelled ones between, and labels them as people
// write numbers: no more decimals than the step needs, and a k, M or G
// suffix once they reach ten thousand, a million or a billion. (gonum's
// own DefaultTicks labels only about three.)
type readableTicks struct {
	log bool
}

func (t readableTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || !isFinite(lo) || !isFinite(hi) || t.log && lo <= 0 {
		return nil
	}
	var major, minor []float64
	step := 0.0
	if t.log {
		for e := math.Floor(math.Log10(lo) + 1e-9); math.Pow(10, e) <= hi*(1+1e-9); e++ {
			v := math.Pow(10, e)
			if v >= lo*(1-1e-9) {
				major = append(major, v)
			}
			for m := 2.0; m < 10; m++ {
				if w := m * v; w >= lo && w <= hi {
					minor = append(minor, w)
				}
			}
		}
	} else {
		step = tickStep(hi - lo)
		for k := math.Ceil(lo/step - 1e-9); k*step <= hi+step*1e-9; k++ {
			major = append(major, k*step)
		}
	}
	labels := tickLabels(major, step)
	ticks := make([]plot.Tick, 0, len(major)+len(minor))
	for i, v := range major {
		ticks = append(ticks, plot.Tick{Value: v, Label: labels[i]})
	}
	for _, v := range minor {
		ticks = append(ticks, plot.Tick{Value: v})
	}
	return ticks
}

// tickStep returns the finest round step, 1, 2 or 5 × 10^k, that splits
// span into at most maxTickIntervals intervals.
func tickStep(span float64) float64 {
	if !(span > 0) || !isFinite(span) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(span/maxTickIntervals)))
	for _, m := range []float64{1, 2, 5, 10, 20} {
		if span/(m*mag) <= maxTickIntervals*(1+1e-9) {
			return m * mag
		}
	}
	return 20 * mag
}

// RoundOut widens [lo, hi] outwards to whole ticks of a linear axis of
// NewPlot's, so that both ends are labelled. Widening can make readableTicks pick a
// coarser step for the new range: widen again until the step holds.
func RoundOut(lo, hi float64) (float64, float64) {
	for range 4 {
		step := tickStep(hi - lo)
		nlo, nhi := math.Floor(lo/step+1e-9)*step, math.Ceil(hi/step-1e-9)*step
		if nlo == lo && nhi == hi {
			break
		}
		lo, hi = nlo, nhi
	}
	return lo, hi
}

// tickLabels formats tick values with as many decimals as step needs (all
// they have when step is 0), without trailing zeros, and with a k, M or G
// suffix once the largest reaches ten thousand, a million or a billion.
func tickLabels(ticks []float64, step float64) []string {
	top := 0.0
	for _, t := range ticks {
		top = math.Max(top, math.Abs(t))
	}
	scale, suffix := 1.0, ""
	switch {
	case top >= 1e9:
		scale, suffix = 1e9, "G"
	case top >= 1e6:
		scale, suffix = 1e6, "M"
	case top >= 1e4:
		scale, suffix = 1e3, "k"
	}
	decimals := -1
	if step > 0 && isFinite(step) {
		decimals = max(0, int(-math.Floor(math.Log10(step/scale)+1e-9)))
	}
	labels := make([]string, len(ticks))
	for i, t := range ticks {
		var s string
		if decimals < 0 {
			s = FormatSig(t/scale, 6)
		} else {
			s = strconv.FormatFloat(t/scale, 'f', decimals, 64)
		}
		if strings.Contains(s, ".") && !strings.ContainsRune(s, 'e') {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		if s == "-0" || strings.Trim(s, "-0.") == "" {
			s = "0"
		} else if suffix != "" {
			s += suffix
		}
		labels[i] = s
	}
	return labels
}

// downsampleXYs thins pts to at most limit points: it keeps the first and
// the last, and from each of (limit-2)/2 equal runs of the rest the lowest
// and the highest point, in their original order.
func downsampleXYs(pts plotter.XYs, limit int) plotter.XYs {
	if len(pts) <= limit || limit < 4 {
		return pts
	}
	inner := pts[1 : len(pts)-1]
	buckets := (limit - 2) / 2
	out := make(plotter.XYs, 0, limit)
	out = append(out, pts[0])
	for k := 0; k < buckets; k++ {
		lo, hi := k*len(inner)/buckets, (k+1)*len(inner)/buckets
		if lo == hi {
			continue
		}
		imin, imax := lo, lo
		for i := lo + 1; i < hi; i++ {
			if inner[i].Y < inner[imin].Y {
				imin = i
			}
			if inner[i].Y > inner[imax].Y {
				imax = i
			}
		}
		switch {
		case imin == imax:
			out = append(out, inner[imin])
		case imin < imax:
			out = append(out, inner[imin], inner[imax])
		default:
			out = append(out, inner[imax], inner[imin])
		}
	}
	return append(out, pts[len(pts)-1])
}

// truncateRunes shortens s to at most n runes, ending it with an ellipsis
// when it was cut.
func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// FormatSig writes v rounded to sig significant digits, in plain decimal
// notation without trailing zeros (exponent notation only beyond 1e15 or
// below 1e-6).
func FormatSig(v float64, sig int) string {
	if !isFinite(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	if v == 0 {
		return "0"
	}
	a := math.Abs(v)
	if a >= 1e15 || a < 1e-6 {
		return strconv.FormatFloat(v, 'g', sig, 64)
	}
	e := int(math.Floor(math.Log10(a)))
	k := sig - 1 - e // decimal places kept
	var r float64
	if k >= 0 {
		p := math.Pow(10, float64(k))
		r = math.Round(v*p) / p
	} else {
		p := math.Pow(10, float64(-k))
		r = math.Round(v/p) * p
	}
	if r == 0 {
		return "0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

func isFinite(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0)
}
