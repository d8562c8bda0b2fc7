package metrics

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file is an independent reader of the text exposition format 0.0.4,
// strict enough to reject what a Prometheus server would: tests run the
// registry's output through it rather than trusting the writer.

// parsedFamily is one metric family as read back.
type parsedFamily struct {
	name, help, typ string
	samples         []parsedSample
}

// parsedSample is one sample line as read back.
type parsedSample struct {
	name   string
	labels [][2]string // in line order
	value  float64
}

func (s parsedSample) label(name string) (string, bool) {
	for _, l := range s.labels {
		if l[0] == name {
			return l[1], true
		}
	}
	return "", false
}

// parseExposition reads text line by line and checks it against the
// grammar:
//
//	line    = help | type | sample
//	help    = "# HELP " name " " escaped-text
//	type    = "# TYPE " name " " ("counter" | "gauge" | "histogram")
//	sample  = name [ "{" label *( "," label ) "}" ] " " value
//	label   = label-name "=" '"' escaped-value '"'
//
// and the rules around it: every family has HELP then TYPE before its
// samples, appears once, families are in name order, sample names belong
// to their family, no two samples share name and labels, and histogram
// buckets are cumulative, end with +Inf and agree with _count.
func parseExposition(text string) ([]parsedFamily, error) {
	if text == "" {
		return nil, nil
	}
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("exposition does not end with a newline")
	}
	var (
		fams []parsedFamily
		cur  *parsedFamily
		seen = map[string]bool{}
	)
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", n+1, line, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.HasPrefix(line, "# HELP "):
			rest := strings.TrimPrefix(line, "# HELP ")
			name, help, ok := strings.Cut(rest, " ")
			if !ok {
				return nil, fail("HELP without text")
			}
			if !validMetricName(name) {
				return nil, fail("bad metric name")
			}
			if seen[name] {
				return nil, fail("family %s appears twice", name)
			}
			if len(fams) > 0 && fams[len(fams)-1].name >= name {
				return nil, fail("family %s after %s: not in name order", name, fams[len(fams)-1].name)
			}
			seen[name] = true
			text, err := unescape(help, false)
			if err != nil {
				return nil, fail("%v", err)
			}
			fams = append(fams, parsedFamily{name: name, help: text})
			cur = &fams[len(fams)-1]
		case strings.HasPrefix(line, "# TYPE "):
			rest := strings.TrimPrefix(line, "# TYPE ")
			name, typ, ok := strings.Cut(rest, " ")
			if !ok || cur == nil || cur.name != name || cur.typ != "" {
				return nil, fail("TYPE not right after its HELP")
			}
			switch typ {
			case "counter", "gauge", "histogram":
			default:
				return nil, fail("unknown type %q", typ)
			}
			cur.typ = typ
		case strings.HasPrefix(line, "#"):
			return nil, fail("unexpected comment")
		default:
			if cur == nil || cur.typ == "" {
				return nil, fail("sample before HELP and TYPE")
			}
			s, err := parseSample(line)
			if err != nil {
				return nil, fail("%v", err)
			}
			if !belongs(cur, s) {
				return nil, fail("sample %s in family %s (%s)", s.name, cur.name, cur.typ)
			}
			for _, o := range cur.samples {
				if o.name == s.name && slices.Equal(o.labels, s.labels) {
					return nil, fail("duplicate series")
				}
			}
			cur.samples = append(cur.samples, s)
		}
	}
	for _, f := range fams {
		if f.typ == "" {
			return nil, fmt.Errorf("family %s has no TYPE", f.name)
		}
		if len(f.samples) == 0 {
			return nil, fmt.Errorf("family %s has no samples", f.name)
		}
		if f.typ == "histogram" {
			if err := checkHistogram(f); err != nil {
				return nil, err
			}
		}
	}
	return fams, nil
}

func belongs(f *parsedFamily, s parsedSample) bool {
	if f.typ != "histogram" {
		_, hasLE := s.label("le")
		return s.name == f.name && !hasLE
	}
	switch s.name {
	case f.name + "_bucket":
		_, ok := s.label("le")
		return ok
	case f.name + "_sum", f.name + "_count":
		_, ok := s.label("le")
		return !ok
	}
	return false
}

// checkHistogram checks every series of a histogram family: buckets in
// increasing le order with non-decreasing counts, ending at +Inf, then _sum
// and _count with _count equal to the +Inf bucket.
func checkHistogram(f parsedFamily) error {
	type series struct {
		les    []float64
		counts []float64
		sum    bool
		count  float64
		hasCnt bool
	}
	by := map[string]*series{}
	var order []string
	for _, s := range f.samples {
		var rest [][2]string
		for _, l := range s.labels {
			if l[0] != "le" {
				rest = append(rest, l)
			}
		}
		key := fmt.Sprint(rest)
		sr := by[key]
		if sr == nil {
			sr = &series{}
			by[key] = sr
			order = append(order, key)
		}
		switch s.name {
		case f.name + "_bucket":
			if sr.sum || sr.hasCnt {
				return fmt.Errorf("%s%s: bucket after _sum or _count", f.name, key)
			}
			v, _ := s.label("le")
			le, err := parseValue(v)
			if err != nil {
				return fmt.Errorf("%s%s: le %q: %v", f.name, key, v, err)
			}
			if n := len(sr.les); n > 0 && (le <= sr.les[n-1] || s.value < sr.counts[n-1]) {
				return fmt.Errorf("%s%s: bucket le=%v (%v) after le=%v (%v)", f.name, key, le, s.value, sr.les[n-1], sr.counts[n-1])
			}
			sr.les = append(sr.les, le)
			sr.counts = append(sr.counts, s.value)
		case f.name + "_sum":
			sr.sum = true
		case f.name + "_count":
			sr.count, sr.hasCnt = s.value, true
		}
	}
	for _, key := range order {
		sr := by[key]
		n := len(sr.les)
		switch {
		case n == 0 || !math.IsInf(sr.les[n-1], 1):
			return fmt.Errorf("%s%s: no +Inf bucket", f.name, key)
		case !sr.sum || !sr.hasCnt:
			return fmt.Errorf("%s%s: missing _sum or _count", f.name, key)
		case sr.count != sr.counts[n-1]:
			return fmt.Errorf("%s%s: _count %v, +Inf bucket %v", f.name, key, sr.count, sr.counts[n-1])
		}
	}
	return nil
}

func parseSample(line string) (parsedSample, error) {
	var s parsedSample
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.name = line[:i]
	if !validMetricName(s.name) {
		return s, fmt.Errorf("bad metric name %q", s.name)
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			eq := strings.IndexByte(rest, '=')
			if eq < 0 {
				return s, fmt.Errorf("label without =")
			}
			name := rest[:eq]
			if !validName(name, false) {
				return s, fmt.Errorf("bad label name %q", name)
			}
			for _, l := range s.labels {
				if l[0] == name {
					return s, fmt.Errorf("label %s twice", name)
				}
			}
			rest = rest[eq+1:]
			if rest == "" || rest[0] != '"' {
				return s, fmt.Errorf("label %s: value not quoted", name)
			}
			rest = rest[1:]
			end := -1
			for j := 0; j < len(rest); j++ {
				if rest[j] == '\\' {
					j++
					continue
				}
				if rest[j] == '"' {
					end = j
					break
				}
			}
			if end < 0 {
				return s, fmt.Errorf("label %s: unterminated value", name)
			}
			v, err := unescape(rest[:end], true)
			if err != nil {
				return s, fmt.Errorf("label %s: %v", name, err)
			}
			s.labels = append(s.labels, [2]string{name, v})
			rest = rest[end+1:]
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
				continue
			}
			if !strings.HasPrefix(rest, "}") {
				return s, fmt.Errorf("expected , or } after label %s", name)
			}
			rest = rest[1:]
			break
		}
	}
	if !strings.HasPrefix(rest, " ") {
		return s, fmt.Errorf("no space before value")
	}
	v, err := parseValue(rest[1:])
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// parseValue reads a sample value as Prometheus does: a Go float, or +Inf,
// -Inf, NaN.
func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	if s == "" || strings.ContainsAny(s, " \t") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "infinity") {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return strconv.ParseFloat(s, 64)
}

// unescape undoes the format's escapes: \\ and \n everywhere, \" in label
// values only. Any other escape, a raw newline, a raw double quote in a
// label value or invalid UTF-8 is an error.
func unescape(s string, label bool) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("invalid UTF-8")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\n':
			return "", fmt.Errorf("raw newline")
		case c == '"' && label:
			return "", fmt.Errorf("raw double quote")
		case c != '\\':
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			return "", fmt.Errorf("trailing backslash")
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !label {
				return "", fmt.Errorf(`\" in HELP text`)
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	return b.String(), nil
}
