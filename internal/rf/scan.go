package rf

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// outline is what one pass over a request body finds before it is
// decoded: whether its top level is an object, how many members it has
// and how many of them are "@odata." annotations, and the JSON pointer of
// the first member name an object repeats.
type outline struct {
	object      bool   // the first value is an object
	members     int    // the top-level object's members
	annotations int    // of which "@odata.*"
	dup         string // JSON pointer (without "#") of a repeated name; "" if none
	values      int    // values read (objects, arrays, strings, numbers, literals), at most MaxValues+1
}

// MaxValues is the most JSON values (objects, arrays, strings, numbers,
// true, false and null, wherever they are) that a request body may hold.
// The largest bodies the services take, a host agent's telemetry push of
// api.MaxUsageSamples samples, hold about 16,400. With at most MaxValues
// values and MaxBody bytes, decoding a body costs a few times what
// reading as many bytes of one string costs, whatever its shape (see
// BenchmarkDecode): encoding/json builds every element of an array even
// after one of them had the wrong type.
const MaxValues = 32768

// smallObject is how many member names an object keeps in a list before
// it indexes them in a map.
const smallObject = 16

// scanFrame is one open object or array.
type scanFrame struct {
	array   bool
	index   int                 // an array's next element
	keys    int                 // an object's first name in scanner.keys
	names   map[string]struct{} // an object's names, once it has more than smallObject
	current string              // an object's member being read, or "": for the path only
	seg     string              // this value's segment of its parent's path
}

// scanOutline reads data once and returns its outline. It never fails: on
// malformed JSON it stops and returns what it found so far, and the
// decoder says what is wrong. Its time and memory are linear in data
// (jsonlimit.Check has bounded the depth first): names are compared as
// the bytes they are unless one is escaped, small objects keep their
// names in one shared list, and a path is built only for the answer.
func scanOutline(data []byte) outline {
	var (
		out     outline
		stack   []scanFrame
		keys    []string // names of the open small objects, innermost last
		wantKey bool     // the next string is a member name
	)
	i := 0
	skipSpace := func() {
		for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
			i++
		}
	}
	// str reads the string starting at data[i] ('"') and returns its
	// bytes without quotes, and whether it holds an escape.
	str := func() ([]byte, bool, bool) {
		start, escaped := i+1, false
		for i++; i < len(data); i++ {
			switch data[i] {
			case '\\':
				escaped = true
				i++
			case '"':
				i++
				return data[start : i-1], escaped, true
			}
		}
		return nil, false, false
	}
	// segment is the path segment of the value about to start inside the
	// innermost frame.
	segment := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := &stack[len(stack)-1]
		if top.array {
			return strconv.Itoa(top.index)
		}
		return top.current
	}
	path := func(name string) string {
		var b strings.Builder
		for _, f := range stack[1:] {
			b.WriteString("/" + pointerEscape.Replace(f.seg))
		}
		b.WriteString("/" + pointerEscape.Replace(name))
		return b.String()
	}
	for {
		skipSpace()
		if i >= len(data) {
			return out
		}
		c := data[i]
		switch {
		case wantKey:
			if c == '}' {
				break // an empty object closes below
			}
			if c != '"' {
				return out
			}
			raw, escaped, ok := str()
			if !ok {
				return out
			}
			// A name is compared as the decoder will see it: escapes
			// decoded, invalid UTF-8 replaced.
			name := string(raw)
			if (escaped || !utf8.Valid(raw)) && json.Unmarshal(data[i-len(raw)-2:i], &name) != nil {
				return out
			}
			top := &stack[len(stack)-1]
			if top.names == nil && len(keys)-top.keys >= smallObject {
				top.names = make(map[string]struct{}, 2*smallObject)
				for _, k := range keys[top.keys:] {
					top.names[k] = struct{}{}
				}
				keys = keys[:top.keys]
			}
			seen := false
			if top.names != nil {
				_, seen = top.names[name]
				top.names[name] = struct{}{}
			} else {
				for _, k := range keys[top.keys:] {
					if k == name {
						seen = true
						break
					}
				}
				keys = append(keys, name)
			}
			if seen {
				out.dup = path(name)
				return out
			}
			top.current = name
			if len(stack) == 1 {
				out.members++
				if strings.HasPrefix(name, "@odata.") {
					out.annotations++
				}
			}
			skipSpace()
			if i >= len(data) || data[i] != ':' {
				return out
			}
			i++
			wantKey = false
			continue
		}
		if c != ',' && c != '}' && c != ']' {
			if out.values++; out.values > MaxValues {
				return out
			}
		}
		switch c {
		case '{', '[':
			if len(stack) == 0 {
				out.object = c == '{'
			}
			stack = append(stack, scanFrame{array: c == '[', keys: len(keys), seg: segment()})
			i++
			wantKey = c == '{'
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1].array != (c == ']') {
				return out
			}
			keys = keys[:stack[len(stack)-1].keys]
			stack = stack[:len(stack)-1]
			i++
			wantKey = false
			if len(stack) == 0 {
				return out
			}
		case ',':
			if len(stack) == 0 {
				return out
			}
			i++
			if top := &stack[len(stack)-1]; top.array {
				top.index++
			} else {
				wantKey = true
			}
		case '"':
			if _, _, ok := str(); !ok {
				return out
			}
		default:
			// A number, true, false or null: to the next delimiter.
			for i++; i < len(data) && !delimiter[data[i]]; i++ {
			}
		}
		if len(stack) == 0 {
			return out // a scalar at the top level
		}
	}
}

// delimiter marks the bytes that end a number or a literal.
var delimiter = [256]bool{',': true, ']': true, '}': true, ' ': true, '\t': true, '\r': true, '\n': true}

// pointerEscape escapes a name for a JSON pointer (RFC 6901).
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

// duplicateMember returns the JSON pointer (without "#") of the first
// member name that an object of data repeats, "" if none does.
func duplicateMember(data []byte) string { return scanOutline(data).dup }
