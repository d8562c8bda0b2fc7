package odata

// $filter (DSP0266 §7.3.4) on every resource collection.
//
// Grammar, with keywords lowercase as in OData:
//
//	filter     = or
//	or         = and *( "or" and )
//	and        = unary *( "and" unary )
//	unary      = "not" unary / "(" or ")" / comparison
//	comparison = operand ( "eq" / "ne" / "gt" / "ge" / "lt" / "le" ) operand
//	operand    = path / 'string' / number / "true" / "false" / "null"
//	path       = name *( "/" name )          Status/Health, Oem/Rackpool/Drawer
//	string     = quoted with ', '' inside is one '
//	number     = [ "-" ] digits [ "." digits ]
//
// so the precedence is not (over the comparison or parenthesised filter
// after it), comparison, and, or. parseQuery parses the filter before any
// handler runs, so a filter that is malformed (400
// QueryParameterValueFormatError naming the position) or too large (400
// QueryParameterOutOfRange: more than maxFilterLen characters, nesting
// deeper than maxFilterDepth, more than maxFilterComparisons comparisons)
// costs nothing else. The parser recurses only per level of nesting,
// which is bounded, and the tree it builds is no deeper than
// filterTreeDepth: and and or keep their operands in one list.
//
// shape applies the filter to a collection before $skip and $top: each
// member is evaluated on its full body, a reference fetched as the client
// by the expander (so authorisation is the same as for $expand, and a
// member the client cannot read is dropped). A comparison is true only
// when both sides have the same type and the relation holds: strings
// compare lexically, numbers by value, booleans with eq and ne only; a
// missing property is null, which matches only eq null, while ne null
// matches a property that has a value. Objects and arrays match nothing.
// A property path that no member of the collection has is a 400, so a
// misspelt name does not read as an empty result.

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"rackpool/internal/rf"
)

const (
	// maxFilterLen bounds a $filter, in characters.
	maxFilterLen = 4096
	// maxFilterDepth bounds the nesting of parentheses and not.
	maxFilterDepth = 32
	// maxFilterComparisons bounds the comparisons of one filter.
	maxFilterComparisons = 256
	// filterTreeDepth bounds the depth of a parsed filter: each level of
	// nesting adds at most an or and an and node, and a not one level.
	filterTreeDepth = 2*(maxFilterDepth+1) + 1
)

// filterOp is the kind of a filter node.
type filterOp byte

const (
	filterOr filterOp = iota + 1
	filterAnd
	filterNot
	filterCmp
)

// filterNode is one node of a parsed filter: or and and have two or more
// kids, not one, a comparison none.
type filterNode struct {
	op   filterOp
	kids []*filterNode
	cmp  string // eq ne gt ge lt le
	l, r filterOperand
}

// filterOperand is a side of a comparison: a property path or a literal.
type filterOperand struct {
	path []string // nil for a literal
	lit  filterValue
}

// filterKind is the type of a value compared.
type filterKind byte

const (
	kindNull filterKind = iota
	kindBool
	kindNumber
	kindString
	kindOther // an object or an array: matches nothing
)

// filterValue is a literal, or a property's value as compared.
type filterValue struct {
	kind    filterKind
	literal bool   // written in the filter (a null literal, not a missing property)
	s       string // a string, or a number's text
	b       bool
}

// filter is a parsed $filter.
type filter struct {
	root  *filterNode
	paths [][]string // the distinct property paths, in order of appearance
}

// parseFilter parses a $filter value.
func parseFilter(v string) (*filter, *rf.Problem) {
	if n := utf8.RuneCountInString(v); n > maxFilterLen {
		e := errRange(filterEcho(v), "$filter", fmt.Sprintf("(at most %d characters)", maxFilterLen))
		e.Resolution = fmt.Sprintf("The filter has %d characters; shorten it to at most %d.", n, maxFilterLen)
		return nil, e
	}
	p := &filterParser{src: v}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokEOF {
		return nil, p.errorAt(p.tok.pos, "expected a comparison; the filter is empty")
	}
	root, err := p.or(0)
	if err != nil {
		return nil, err
	}
	switch {
	case p.tok.kind == tokRParen:
		return nil, p.errorAt(p.tok.pos, "')' has no matching '('")
	case p.tok.kind != tokEOF:
		return nil, p.errorAt(p.tok.pos, "expected 'and', 'or' or the end of the filter, found "+p.found()+lowercaseHint(p.tok))
	}
	return &filter{root: root, paths: p.paths}, nil
}

// filterEcho is a filter as an error message quotes it: in full up to
// maxFilterLen characters, else its start.
func filterEcho(v string) string {
	if utf8.RuneCountInString(v) <= maxFilterLen {
		return v
	}
	n := 0
	for i := range v {
		if n == 64 {
			return v[:i] + "..."
		}
		n++
	}
	return v
}

// Tokens.

type filterTokKind byte

const (
	tokEOF filterTokKind = iota
	tokName
	tokString
	tokNumber
	tokLParen
	tokRParen
)

type filterToken struct {
	kind filterTokKind
	text string // a name or number as written; a string's value
	pos  int    // byte offset in the filter
	end  int    // byte offset after the token
}

// filterParser is a recursive-descent parser over one filter.
type filterParser struct {
	src   string
	i     int // byte offset of the next token
	tok   filterToken
	cmps  int
	paths [][]string
}

// errorAt is the 400 for a malformed filter at byte offset off: the
// resolution names the 1-based character position and what was expected.
func (p *filterParser) errorAt(off int, what string) *rf.Problem {
	e := errFormat(p.src, "$filter")
	e.Resolution = fmt.Sprintf("At position %d: %s.", p.position(off), what)
	return e
}

// position is the 1-based character position of byte offset off.
func (p *filterParser) position(off int) int { return utf8.RuneCountInString(p.src[:off]) + 1 }

// found describes the current token for an error.
func (p *filterParser) found() string {
	switch p.tok.kind {
	case tokEOF:
		return "the end of the filter"
	case tokString:
		return "a string"
	case tokNumber:
		return "the number " + p.tok.text
	}
	return "'" + p.src[p.tok.pos:p.tok.end] + "'"
}

// lowercaseHint points out a keyword written in the wrong case.
func lowercaseHint(t filterToken) string {
	if t.kind == tokName && filterKeywords[strings.ToLower(t.text)] && !filterKeywords[t.text] {
		return " (keywords are lowercase: " + strings.ToLower(t.text) + ")"
	}
	return ""
}

// filterKeywords are the names that are not property names.
var filterKeywords = map[string]bool{"and": true, "or": true, "not": true, "eq": true, "ne": true, "gt": true,
	"ge": true, "lt": true, "le": true, "true": true, "false": true, "null": true}

// comparisonOps are the comparison operators.
var comparisonOps = map[string]bool{"eq": true, "ne": true, "gt": true, "ge": true, "lt": true, "le": true}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '@' || c == '#'
}

func isNameByte(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == '.' || c == '/'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// next reads the next token into p.tok.
func (p *filterParser) next() *rf.Problem {
	s := p.src
	for p.i < len(s) && (s[p.i] == ' ' || s[p.i] == '\t') {
		p.i++
	}
	start := p.i
	p.tok = filterToken{pos: start, end: start}
	if start == len(s) {
		return nil
	}
	c := s[start]
	switch {
	case c == '(' || c == ')':
		p.tok.kind = tokLParen
		if c == ')' {
			p.tok.kind = tokRParen
		}
		p.i++
	case c == '\'':
		var b strings.Builder
		i := start + 1
		for {
			j := strings.IndexByte(s[i:], '\'')
			if j < 0 {
				return p.errorAt(start, "the string that starts here has no closing quote")
			}
			b.WriteString(s[i : i+j])
			i += j + 1
			if i < len(s) && s[i] == '\'' { // '' is a quote inside the string
				b.WriteByte('\'')
				i++
				continue
			}
			break
		}
		p.tok.kind, p.tok.text, p.i = tokString, b.String(), i
	case c == '-' || isDigit(c):
		i := start
		if c == '-' {
			i++
		}
		digits := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		ok := i > digits
		if ok && i < len(s) && s[i] == '.' {
			i++
			frac := i
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			ok = i > frac
		}
		for i < len(s) && (isNameByte(s[i]) || s[i] == '-') { // 12ab, 1.2.3: one malformed number
			ok = false
			i++
		}
		if !ok {
			return p.errorAt(start, "malformed number '"+s[start:i]+"'; write numbers as 42, -3 or 2.5")
		}
		p.tok.kind, p.tok.text, p.i = tokNumber, s[start:i], i
	case isNameStart(c):
		i := start + 1
		for i < len(s) && isNameByte(s[i]) {
			i++
		}
		p.tok.kind, p.tok.text, p.i = tokName, s[start:i], i
	case c == '"':
		return p.errorAt(start, "unexpected '\"'; write strings in single quotes: 'On'")
	default:
		r, _ := utf8.DecodeRuneInString(s[start:])
		return p.errorAt(start, fmt.Sprintf("unexpected character %q", r))
	}
	p.tok.end = p.i
	return nil
}

// or parses or-separated ands at nesting depth.
func (p *filterParser) or(depth int) (*filterNode, *rf.Problem) {
	n, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	kids := []*filterNode{n}
	for p.tok.kind == tokName && p.tok.text == "or" {
		if err := p.next(); err != nil {
			return nil, err
		}
		if n, err = p.and(depth); err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return kids[0], nil
	}
	return &filterNode{op: filterOr, kids: kids}, nil
}

// and parses and-separated unary expressions at nesting depth.
func (p *filterParser) and(depth int) (*filterNode, *rf.Problem) {
	n, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	kids := []*filterNode{n}
	for p.tok.kind == tokName && p.tok.text == "and" {
		if err := p.next(); err != nil {
			return nil, err
		}
		if n, err = p.unary(depth); err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return kids[0], nil
	}
	return &filterNode{op: filterAnd, kids: kids}, nil
}

// unary parses not, a parenthesised filter or a comparison.
func (p *filterParser) unary(depth int) (*filterNode, *rf.Problem) {
	tok := p.tok
	nested := tok.kind == tokLParen || (tok.kind == tokName && tok.text == "not")
	if nested && depth+1 > maxFilterDepth {
		e := errRange(p.src, "$filter", fmt.Sprintf("(at most %d levels of parentheses and not)", maxFilterDepth))
		e.Resolution = fmt.Sprintf("At position %d: the filter nests deeper than %d levels; simplify it.", p.position(tok.pos), maxFilterDepth)
		return nil, e
	}
	switch {
	case tok.kind == tokName && tok.text == "not":
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokEOF {
			return nil, p.errorAt(p.tok.pos, "expected a comparison or '(' after 'not'")
		}
		kid, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &filterNode{op: filterNot, kids: []*filterNode{kid}}, nil
	case tok.kind == tokLParen:
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokRParen {
			return nil, p.errorAt(p.tok.pos, "expected a comparison inside '()'")
		}
		n, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokRParen {
			open := p.position(tok.pos)
			if p.tok.kind == tokEOF {
				return nil, p.errorAt(p.tok.pos, fmt.Sprintf("expected ')' to close the '(' at position %d", open))
			}
			return nil, p.errorAt(p.tok.pos, fmt.Sprintf("expected 'and', 'or' or ')' to close the '(' at position %d, found %s%s",
				open, p.found(), lowercaseHint(p.tok)))
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		return n, nil
	}
	return p.comparison()
}

// comparison parses operand op operand.
func (p *filterParser) comparison() (*filterNode, *rf.Problem) {
	start := p.tok
	if p.cmps++; p.cmps > maxFilterComparisons {
		e := errRange(p.src, "$filter", fmt.Sprintf("(at most %d comparisons)", maxFilterComparisons))
		e.Resolution = fmt.Sprintf("At position %d: the filter has more than %d comparisons; simplify it.", p.position(start.pos), maxFilterComparisons)
		return nil, e
	}
	l, err := p.operand("a comparison, 'not' or '('")
	if err != nil {
		return nil, err
	}
	left := p.src[start.pos:start.end]
	if p.tok.kind != tokName || !comparisonOps[p.tok.text] {
		hint := lowercaseHint(p.tok)
		if hint == "" {
			hint = lowercaseHint(start) // NOT (...)
		}
		return nil, p.errorAt(p.tok.pos, fmt.Sprintf("expected a comparison operator (eq, ne, gt, ge, lt or le) after '%s', found %s%s",
			left, p.found(), hint))
	}
	op := p.tok
	if err := p.next(); err != nil {
		return nil, err
	}
	r, err := p.operand("a value after '" + op.text + "'")
	if err != nil {
		return nil, err
	}
	if op.text != "eq" && op.text != "ne" {
		for _, o := range []filterOperand{l, r} {
			if o.path == nil && (o.lit.kind == kindBool || o.lit.kind == kindNull) {
				return nil, p.errorAt(op.pos, fmt.Sprintf("'%s' orders numbers and strings; true, false and null compare only with eq and ne", op.text))
			}
		}
	}
	return &filterNode{op: filterCmp, cmp: op.text, l: l, r: r}, nil
}

// operand parses a property path or a literal; expected says what an
// error reports was expected.
func (p *filterParser) operand(expected string) (filterOperand, *rf.Problem) {
	tok := p.tok
	var o filterOperand
	switch tok.kind {
	case tokString:
		o.lit = filterValue{kind: kindString, literal: true, s: tok.text}
	case tokNumber:
		o.lit = filterValue{kind: kindNumber, literal: true, s: tok.text}
	case tokName:
		switch tok.text {
		case "true", "false":
			o.lit = filterValue{kind: kindBool, literal: true, b: tok.text == "true"}
		case "null":
			o.lit = filterValue{kind: kindNull, literal: true}
		default:
			if filterKeywords[tok.text] {
				return o, p.errorAt(tok.pos, "expected "+expected+", found '"+tok.text+"'")
			}
			segs := strings.Split(tok.text, "/")
			for i, seg := range segs {
				if seg == "" || !isNameStart(seg[0]) {
					off := tok.pos + len(strings.Join(segs[:i], "/"))
					if i > 0 {
						off++
					}
					return o, p.errorAt(off, "expected a property name after '/' in '"+tok.text+"'")
				}
			}
			o.path = segs
			p.addPath(segs)
		}
	default:
		return o, p.errorAt(tok.pos, "expected "+expected+", found "+p.found())
	}
	return o, p.next()
}

// addPath records a property path the filter reads.
func (p *filterParser) addPath(segs []string) {
	for _, q := range p.paths {
		if strings.Join(q, "/") == strings.Join(segs, "/") {
			return
		}
	}
	p.paths = append(p.paths, segs)
}

// Evaluation.

// members replaces a collection's Members with those f matches and sets
// Members@odata.count to their number. References are read with x, as
// the client; a member x cannot read is dropped. A property path that no
// member read has is a 400.
func (f *filter) members(body map[string]any, x *expander) *rf.Problem {
	members, _ := body["Members"].([]any)
	kept := []any{}
	seen := make([]bool, len(f.paths))
	unseen, read := len(f.paths), 0
	for _, m := range members {
		obj, ok := m.(map[string]any)
		if !ok {
			continue
		}
		if id, ok := refTarget(obj); ok {
			if obj = x.get(id).body; obj == nil {
				continue
			}
		}
		read++
		for i, path := range f.paths {
			if unseen == 0 {
				break
			}
			if _, ok := lookup(obj, path); ok && !seen[i] {
				seen[i] = true
				unseen--
			}
		}
		if f.root.eval(obj) {
			kept = append(kept, m)
		}
	}
	if read > 0 && unseen > 0 {
		for i, path := range f.paths {
			if !seen[i] {
				name := strings.Join(path, "/")
				return Invalid("$filter", "No member of this collection has the property "+name+
					"; check its spelling and case, and the levels of the path (Status/Health).")
			}
		}
	}
	body["Members"] = kept
	body["Members@odata.count"] = len(kept)
	delete(body, "Members@odata.nextLink")
	return nil
}

// lookup walks a property path in a body.
func lookup(obj map[string]any, path []string) (any, bool) {
	var v any = obj
	for _, seg := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return v, true
}

// eval reports whether the member body obj satisfies n.
func (n *filterNode) eval(obj map[string]any) bool {
	switch n.op {
	case filterOr:
		for _, k := range n.kids {
			if k.eval(obj) {
				return true
			}
		}
		return false
	case filterAnd:
		for _, k := range n.kids {
			if !k.eval(obj) {
				return false
			}
		}
		return true
	case filterNot:
		return !n.kids[0].eval(obj)
	}
	return compareValues(n.cmp, n.l.value(obj), n.r.value(obj))
}

// value is the operand's value in obj: a missing property is null.
func (o filterOperand) value(obj map[string]any) filterValue {
	if o.path == nil {
		return o.lit
	}
	v, _ := lookup(obj, o.path)
	switch t := v.(type) {
	case nil:
		return filterValue{kind: kindNull}
	case string:
		return filterValue{kind: kindString, s: t}
	case bool:
		return filterValue{kind: kindBool, b: t}
	case json.Number:
		return filterValue{kind: kindNumber, s: t.String()}
	case float64:
		return filterValue{kind: kindNumber, s: strconv.FormatFloat(t, 'g', -1, 64)}
	case int:
		return filterValue{kind: kindNumber, s: strconv.Itoa(t)}
	}
	return filterValue{kind: kindOther}
}

// compareValues applies a comparison operator. Only values of one type
// compare; null (a missing property too) is equal only to null, and ne
// null holds for a property that has a value.
func compareValues(op string, a, b filterValue) bool {
	if a.kind == kindNull || b.kind == kindNull {
		switch op {
		case "eq":
			return a.kind == b.kind
		case "ne": // X ne null: X has a value
			return a.kind != b.kind && (a.kind == kindNull && a.literal || b.kind == kindNull && b.literal)
		}
		return false
	}
	if a.kind != b.kind {
		return false
	}
	var c int
	switch a.kind {
	case kindString:
		c = strings.Compare(a.s, b.s)
	case kindNumber:
		var ok bool
		if c, ok = compareNumbers(a.s, b.s); !ok {
			return false
		}
	case kindBool:
		switch op {
		case "eq":
			return a.b == b.b
		case "ne":
			return a.b != b.b
		}
		return false
	default:
		return false
	}
	switch op {
	case "eq":
		return c == 0
	case "ne":
		return c != 0
	case "gt":
		return c > 0
	case "ge":
		return c >= 0
	case "lt":
		return c < 0
	case "le":
		return c <= 0
	}
	return false
}

// compareNumbers compares two numbers written in decimal (JSON numbers
// and filter literals) exactly.
func compareNumbers(a, b string) (int, bool) {
	x, errx := strconv.ParseInt(a, 10, 64)
	y, erry := strconv.ParseInt(b, 10, 64)
	if errx == nil && erry == nil {
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	}
	rx, okx := new(big.Rat).SetString(a)
	ry, oky := new(big.Rat).SetString(b)
	if !okx || !oky {
		return 0, false
	}
	return rx.Cmp(ry), true
}
