package sim

// This file is a small, dependency-free SVG chart writer: line charts of
// named (x, y) series and categorical bar charts. The output depends only on
// the input (no maps are iterated, nothing random or timed), so the same
// chart is the same bytes every time. Every piece of text is XML-escaped and
// every number is written in its shortest form, coordinates to a tenth of a
// pixel. Styling is by presentation attributes only (no <style>, no ids), so
// several charts can be inlined into one HTML page without clashing.

import (
	"encoding/xml"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ChartPoint is one (x, y) point of a line chart series.
type ChartPoint struct {
	X, Y float64
}

// ChartSeries is one line of a LineChart, named in the legend unless Name
// is empty. Its points are drawn in the order given (a time series is
// already in x order); points with a NaN or infinite coordinate are
// skipped.
type ChartSeries struct {
	Name   string
	Points []ChartPoint
}

// LineChart is a chart of one or more named series against shared axes.
type LineChart struct {
	Title  string
	XLabel string
	YLabel string
	Series []ChartSeries
	// YFixed pins the y axis to [YMin, YMax] (points outside are drawn at
	// the edge). Otherwise the axis spans the data, widened to round tick
	// values, and starts at zero when YFromZero is set and no value is
	// negative.
	YFixed    bool
	YMin      float64
	YMax      float64
	YFromZero bool
	// Width and Height are the picture's size in pixels; 0 means 720×360.
	// The height grows when the legend needs more room.
	Width  int
	Height int
}

// BarChart is a chart of one bar per category, in the order given.
type BarChart struct {
	Title  string
	XLabel string
	YLabel string
	Labels []string
	Values []float64
	// YMax pins the top of the y axis when positive; otherwise the axis
	// spans zero to the largest value, rounded up to a tick.
	YMax float64
	// ValueSuffix is appended to the value printed above each bar ("%").
	ValueSuffix string
	// Width and Height are the picture's size in pixels; 0 means 720×360.
	Width  int
	Height int
}

// MaxChartPoints bounds the points a line chart draws per series. Longer
// series are thinned by downsamplePoints, which keeps the shape (each
// bucket's lowest and highest point) and both ends.
const MaxChartPoints = 2000

const (
	defaultChartWidth  = 720
	defaultChartHeight = 360
	chartMarginLeft    = 64
	chartMarginRight   = 20
	chartMarginTop     = 40
	chartMarginBottom  = 52
	legendRowHeight    = 18
	maxLegendRunes     = 40
)

// chartPalette is the Tableau 10 palette; series beyond ten reuse it with a
// dash pattern so that no two lines look alike until the thirtieth.
var chartPalette = []string{
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
}

var chartDashes = []string{"", "6 3", "2 2"}

// seriesStyle returns the stroke colour and dash pattern of the i-th series.
func seriesStyle(i int) (colour, dash string) {
	return chartPalette[i%len(chartPalette)], chartDashes[(i/len(chartPalette))%len(chartDashes)]
}

// SVG renders the chart as a standalone SVG document.
func (c LineChart) SVG() string {
	width, height := chartSize(c.Width, c.Height)

	// Clean and thin the series first: the axes span what is drawn.
	series := make([]ChartSeries, len(c.Series))
	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	hasData := false
	for i, s := range c.Series {
		pts := make([]ChartPoint, 0, len(s.Points))
		for _, p := range s.Points {
			if !isFinite(p.X) || !isFinite(p.Y) {
				continue
			}
			pts = append(pts, p)
			xlo, xhi = math.Min(xlo, p.X), math.Max(xhi, p.X)
			ylo, yhi = math.Min(ylo, p.Y), math.Max(yhi, p.Y)
			hasData = true
		}
		series[i] = ChartSeries{Name: s.Name, Points: downsamplePoints(pts, MaxChartPoints)}
	}
	if !hasData {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}

	// Every named series is in the legend, and carries its name as a
	// tooltip too; a lone series the title describes can go unnamed.
	legend := make([]string, 0, len(series))
	for _, s := range series {
		if s.Name != "" {
			legend = append(legend, truncateRunes(s.Name, maxLegendRunes))
		}
	}
	legendW := 0
	if len(legend) > 0 {
		longest := 0
		for _, n := range legend {
			longest = max(longest, utf8.RuneCountInString(n))
		}
		legendW = min(max(36+int(math.Ceil(6.8*float64(longest))), 80), width/3)
	}
	height = max(height, chartMarginTop+chartMarginBottom+legendRowHeight*len(legend)+8)

	left, top := chartMarginLeft, chartMarginTop
	pw := width - chartMarginLeft - chartMarginRight - legendW
	ph := height - chartMarginTop - chartMarginBottom

	xa := autoAxis(xlo, xhi, max(2, pw/90), false)
	var ya chartAxis
	if c.YFixed && c.YMax > c.YMin {
		ya = fixedAxis(c.YMin, c.YMax, max(2, ph/60))
	} else {
		ya = autoAxis(ylo, yhi, max(2, ph/60), c.YFromZero)
	}

	var b strings.Builder
	svgOpen(&b, width, height, c.Title)
	plotFrame(&b, left, top, pw, ph, xa, ya, c.XLabel, c.YLabel)

	px := func(x float64) float64 { return float64(left) + (x-xa.lo)/(xa.hi-xa.lo)*float64(pw) }
	py := func(y float64) float64 {
		y = math.Min(math.Max(y, ya.lo), ya.hi)
		return float64(top+ph) - (y-ya.lo)/(ya.hi-ya.lo)*float64(ph)
	}
	for i, s := range series {
		colour, dash := seriesStyle(i)
		if len(s.Points) == 0 {
			continue
		}
		if len(s.Points) > 1 {
			b.WriteString(`<polyline fill="none" stroke="`)
			b.WriteString(colour)
			b.WriteString(`" stroke-width="1.6" stroke-linejoin="round"`)
			if dash != "" {
				b.WriteString(` stroke-dasharray="` + dash + `"`)
			}
			b.WriteString(` points="`)
			for j, p := range s.Points {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(formatCoord(px(p.X)))
				b.WriteByte(',')
				b.WriteString(formatCoord(py(p.Y)))
			}
			b.WriteString(`">`)
			if s.Name != "" {
				b.WriteString("<title>" + xmlEscape(s.Name) + "</title>")
			}
			b.WriteString("</polyline>\n")
		}
		// Few points: mark each, so a sweep's measured points stand out
		// from the lines drawn between them.
		if len(s.Points) <= 40 {
			for _, p := range s.Points {
				tip := formatSig(p.X, 6) + ", " + formatSig(p.Y, 6)
				if s.Name != "" {
					tip = s.Name + ": " + tip
				}
				b.WriteString(`<circle r="3" fill="` + colour + `" cx="` + formatCoord(px(p.X)) + `" cy="` + formatCoord(py(p.Y)) + `"><title>` + xmlEscape(tip) + "</title></circle>\n")
			}
		}
	}
	if !hasData {
		b.WriteString(`<text x="` + formatCoord(float64(left)+float64(pw)/2) + `" y="` + formatCoord(float64(top)+float64(ph)/2) + `" text-anchor="middle" fill="#888">no data</text>` + "\n")
	}

	// Legend, right of the plot, in series order.
	lx := left + pw + 16
	row := 0
	for i, s := range series {
		if s.Name == "" {
			continue
		}
		colour, dash := seriesStyle(i)
		y := top + 8 + row*legendRowHeight
		b.WriteString(`<line x1="` + strconv.Itoa(lx) + `" y1="` + strconv.Itoa(y) + `" x2="` + strconv.Itoa(lx+20) + `" y2="` + strconv.Itoa(y) + `" stroke="` + colour + `" stroke-width="2.5"`)
		if dash != "" {
			b.WriteString(` stroke-dasharray="` + dash + `"`)
		}
		b.WriteString("/>\n")
		b.WriteString(`<text x="` + strconv.Itoa(lx+26) + `" y="` + strconv.Itoa(y+4) + `" fill="#333">`)
		b.WriteString(xmlEscape(legend[row]))
		b.WriteString("</text>\n")
		row++
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// SVG renders the chart as a standalone SVG document.
func (c BarChart) SVG() string {
	width, height := chartSize(c.Width, c.Height)
	left, top := chartMarginLeft, chartMarginTop
	pw := width - chartMarginLeft - chartMarginRight
	ph := height - chartMarginTop - chartMarginBottom

	n := min(len(c.Labels), len(c.Values))
	hi := 0.0
	for _, v := range c.Values[:n] {
		if isFinite(v) {
			hi = math.Max(hi, v)
		}
	}
	var ya chartAxis
	if c.YMax > 0 {
		ya = fixedAxis(0, c.YMax, max(2, ph/60))
	} else {
		ya = autoAxis(0, hi, max(2, ph/60), true)
	}

	var b strings.Builder
	svgOpen(&b, width, height, c.Title)
	plotFrame(&b, left, top, pw, ph, chartAxis{}, ya, c.XLabel, c.YLabel)
	if n == 0 {
		b.WriteString(`<text x="` + formatCoord(float64(left)+float64(pw)/2) + `" y="` + formatCoord(float64(top)+float64(ph)/2) + `" text-anchor="middle" fill="#888">no data</text>` + "\n")
	}
	slot := float64(pw) / float64(max(n, 1))
	barW := math.Min(slot*0.7, 80)
	// Label every k-th category when they would crowd each other.
	every := max(1, int(math.Ceil(float64(n)*40/float64(pw))))
	py := func(y float64) float64 {
		y = math.Min(math.Max(y, ya.lo), ya.hi)
		return float64(top+ph) - (y-ya.lo)/(ya.hi-ya.lo)*float64(ph)
	}
	for i := 0; i < n; i++ {
		v := c.Values[i]
		cx := float64(left) + slot*(float64(i)+0.5)
		colour := chartPalette[0]
		if isFinite(v) {
			y := py(v)
			b.WriteString(`<rect x="` + formatCoord(cx-barW/2) + `" y="` + formatCoord(y) + `" width="` + formatCoord(barW) + `" height="` + formatCoord(float64(top+ph)-y) + `" fill="` + colour + "\"/>\n")
			b.WriteString(`<text x="` + formatCoord(cx) + `" y="` + formatCoord(y-5) + `" text-anchor="middle" fill="#333">` + xmlEscape(formatSig(v, 3)+c.ValueSuffix) + "</text>\n")
		}
		if i%every == 0 {
			b.WriteString(`<text x="` + formatCoord(cx) + `" y="` + strconv.Itoa(top+ph+18) + `" text-anchor="middle" fill="#333">` + xmlEscape(truncateRunes(c.Labels[i], 16)) + "</text>\n")
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// chartSize applies the default size.
func chartSize(w, h int) (int, int) {
	if w <= 0 {
		w = defaultChartWidth
	}
	if h <= 0 {
		h = defaultChartHeight
	}
	// Leave the plot area some room whatever was asked for.
	return max(w, chartMarginLeft+chartMarginRight+160), max(h, chartMarginTop+chartMarginBottom+80)
}

// svgOpen writes the root element, a white background and the title.
func svgOpen(b *strings.Builder, width, height int, title string) {
	w, h := strconv.Itoa(width), strconv.Itoa(height)
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" width="` + w + `" height="` + h + `" viewBox="0 0 ` + w + ` ` + h + `" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="12" role="img">` + "\n")
	if title != "" {
		b.WriteString("<title>" + xmlEscape(title) + "</title>\n")
	}
	b.WriteString(`<rect width="` + w + `" height="` + h + `" fill="#fff"/>` + "\n")
	if title != "" {
		b.WriteString(`<text x="` + strconv.Itoa(chartMarginLeft) + `" y="22" font-size="15" font-weight="600" fill="#222">` + xmlEscape(title) + "</text>\n")
	}
}

// plotFrame writes the grid, the axes, their ticks and labels. An x axis
// with no ticks (a bar chart's) gets only its line and label.
func plotFrame(b *strings.Builder, left, top, pw, ph int, xa, ya chartAxis, xlabel, ylabel string) {
	bottom := top + ph
	for i, t := range ya.ticks {
		y := float64(bottom) - (t-ya.lo)/(ya.hi-ya.lo)*float64(ph)
		ys := formatCoord(y)
		b.WriteString(`<line x1="` + strconv.Itoa(left) + `" y1="` + ys + `" x2="` + strconv.Itoa(left+pw) + `" y2="` + ys + `" stroke="#e6e6e6"/>` + "\n")
		b.WriteString(`<text x="` + strconv.Itoa(left-6) + `" y="` + formatCoord(y+4) + `" text-anchor="end" fill="#555">` + xmlEscape(ya.labels[i]) + "</text>\n")
	}
	for i, t := range xa.ticks {
		x := float64(left) + (t-xa.lo)/(xa.hi-xa.lo)*float64(pw)
		xs := formatCoord(x)
		b.WriteString(`<line x1="` + xs + `" y1="` + strconv.Itoa(bottom) + `" x2="` + xs + `" y2="` + strconv.Itoa(bottom+5) + `" stroke="#555"/>` + "\n")
		b.WriteString(`<text x="` + xs + `" y="` + strconv.Itoa(bottom+18) + `" text-anchor="middle" fill="#555">` + xmlEscape(xa.labels[i]) + "</text>\n")
	}
	b.WriteString(`<line x1="` + strconv.Itoa(left) + `" y1="` + strconv.Itoa(bottom) + `" x2="` + strconv.Itoa(left+pw) + `" y2="` + strconv.Itoa(bottom) + `" stroke="#555"/>` + "\n")
	b.WriteString(`<line x1="` + strconv.Itoa(left) + `" y1="` + strconv.Itoa(top) + `" x2="` + strconv.Itoa(left) + `" y2="` + strconv.Itoa(bottom) + `" stroke="#555"/>` + "\n")
	if xlabel != "" {
		b.WriteString(`<text x="` + formatCoord(float64(left)+float64(pw)/2) + `" y="` + strconv.Itoa(bottom+40) + `" text-anchor="middle" fill="#333">` + xmlEscape(xlabel) + "</text>\n")
	}
	if ylabel != "" {
		cy := formatCoord(float64(top) + float64(ph)/2)
		b.WriteString(`<text x="16" y="` + cy + `" text-anchor="middle" fill="#333" transform="rotate(-90 16 ` + cy + `)">` + xmlEscape(ylabel) + "</text>\n")
	}
}

// chartAxis is one axis's range and its tick values and labels.
type chartAxis struct {
	lo, hi float64
	ticks  []float64
	labels []string
}

// autoAxis spans [lo, hi] with about n round steps, widened outwards to
// whole steps. fromZero pulls a non-negative range down to zero.
func autoAxis(lo, hi float64, n int, fromZero bool) chartAxis {
	if fromZero && lo >= 0 {
		lo = 0
	}
	if !(hi > lo) {
		d := math.Abs(lo) * 0.1
		if d == 0 {
			d = 1
		}
		if fromZero && lo == 0 {
			hi = d
		} else {
			lo, hi = lo-d, hi+d
		}
	}
	step := niceStep(hi-lo, n)
	lo = math.Floor(lo/step+1e-9) * step
	hi = math.Ceil(hi/step-1e-9) * step
	return withTicks(lo, hi, step)
}

// fixedAxis spans exactly [lo, hi] with ticks at round steps inside it.
func fixedAxis(lo, hi float64, n int) chartAxis {
	return withTicks(lo, hi, niceStep(hi-lo, n))
}

// withTicks fills in the ticks at whole multiples of step in [lo, hi].
func withTicks(lo, hi, step float64) chartAxis {
	a := chartAxis{lo: lo, hi: hi}
	first := math.Ceil(lo/step - 1e-9)
	for k := first; k*step <= hi+step*1e-9 && len(a.ticks) < 100; k++ {
		a.ticks = append(a.ticks, k*step)
	}
	a.labels = tickLabels(a.ticks, step)
	return a
}

// niceStep returns a round step, 1, 2 or 5 × 10^k, that splits span into
// about n intervals.
func niceStep(span float64, n int) float64 {
	if !(span > 0) || !isFinite(span) {
		return 1
	}
	raw := span / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f < 1.5:
		return mag
	case f < 3:
		return 2 * mag
	case f < 7:
		return 5 * mag
	default:
		return 10 * mag
	}
}

// tickLabels formats tick values with as many decimals as the step needs,
// without trailing zeros, and with a k, M or G suffix once they reach ten
// thousand, a million or a billion.
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
	decimals := max(0, int(-math.Floor(math.Log10(step/scale)+1e-9)))
	labels := make([]string, len(ticks))
	for i, t := range ticks {
		s := strconv.FormatFloat(t/scale, 'f', decimals, 64)
		if strings.Contains(s, ".") {
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

// downsamplePoints thins pts to at most limit points: it keeps the first
// and the last, and from each of (limit-2)/2 equal runs of the rest the
// lowest and the highest point, in their original order.
func downsamplePoints(pts []ChartPoint, limit int) []ChartPoint {
	if len(pts) <= limit || limit < 4 {
		return pts
	}
	inner := pts[1 : len(pts)-1]
	buckets := (limit - 2) / 2
	out := make([]ChartPoint, 0, limit)
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

// formatCoord writes a pixel coordinate to a tenth of a pixel, without
// trailing zeros.
func formatCoord(v float64) string {
	r := math.Round(v*10) / 10
	if r == 0 {
		r = 0 // no "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// formatSig writes v rounded to sig significant digits, in plain decimal
// notation without trailing zeros (exponent notation only beyond 1e15 or
// below 1e-6).
func formatSig(v float64, sig int) string {
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

// xmlEscape escapes s for XML text and attribute values; characters XML
// cannot hold become U+FFFD.
func xmlEscape(s string) string {
	var b strings.Builder
	// xml.EscapeText only fails when its writer does; a Builder does not.
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// truncateRunes shortens s to at most n runes, ending it with an ellipsis
// when it was cut.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func isFinite(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0)
}
