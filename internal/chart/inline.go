package chart

import (
	"html/template"
	"regexp"
	"strings"
)

// svgNamespaces matches the namespace declarations of an <svg> tag.
var svgNamespaces = regexp.MustCompile(`\s+xmlns(:xlink)?="[^"]*"`)

// Inline prepares a chart's SVG for inlining into an HTML page, which
// implies the namespaces: it drops their declarations from the root tag.
// The chart starts at <svg> and has no ids or style sheet to clash with
// another's, so nothing else changes.
func Inline(svg []byte) template.HTML {
	s := string(svg)
	end := strings.IndexByte(s, '>')
	if !strings.HasPrefix(s, "<svg") || end < 0 {
		return template.HTML(s)
	}
	return template.HTML(svgNamespaces.ReplaceAllString(s[:end], "") + s[end:])
}
