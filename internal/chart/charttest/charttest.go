// Package charttest checks charts in tests: that an SVG parses, is
// self-contained and inlines without clashing, and what text it shows.
package charttest

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// Check walks every token of doc with encoding/xml and returns the
// text of its elements, one per line. It fails the test on malformed XML, a
// root other than svg (in the SVG namespace, unless inline, where HTML
// implies it), and on anything that would clash with another chart inlined
// into the same page or reach outside the document: an id, a class, a
// <style> or <script> element, an external reference.
func Check(t testing.TB, doc string, inline bool) string {
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
			t.Fatalf("SVG does not parse as XML: %v\n%.2000s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
				if !inline && tok.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q", tok.Name.Space)
				}
			}
			if n := tok.Name.Local; n == "style" || n == "script" || n == "image" || n == "use" {
				t.Errorf("SVG holds a <%s> element", n)
			}
			for _, a := range tok.Attr {
				switch {
				case a.Name.Local == "id" || a.Name.Local == "class":
					t.Errorf("SVG element <%s> has %s=%q", tok.Name.Local, a.Name.Local, a.Value)
				case a.Name.Local == "href" || strings.Contains(a.Value, "url("):
					t.Errorf("SVG element <%s> refers outside: %s=%q", tok.Name.Local, a.Name.Local, a.Value)
				}
			}
		case xml.CharData:
			text.Write(tok)
			text.WriteByte('\n')
		case xml.ProcInst:
			t.Errorf("SVG holds a processing instruction <?%s?>", tok.Target)
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return text.String()
}

// Texts returns the text elements of a parsed chart, one per line, as a
// set.
func Texts(text string) map[string]bool {
	set := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		set[l] = true
	}
	return set
}
