// Package jsonlimit bounds how deeply a JSON document nests, before
// anything decodes it.
//
// Every reader of JSON that comes from the network (both Redfish services'
// request bodies, the clients' answers from rackpool, fabric managers and
// BMCs, fabric discovery) calls Check first. A decoder's cost per byte can
// grow with the depth of what it is inside (a path per level, a frame per
// level, an error message naming the path), so a small body of many
// nested brackets can cost seconds and gigabytes; Check refuses it after
// reading at most MaxDepth+1 opening brackets beyond the last closing one,
// in one pass, without allocating.
package jsonlimit

import "fmt"

// MaxDepth is the deepest nesting of objects and arrays that rackpool
// reads. Redfish resources nest a few levels (the deepest of the DMTF
// mockups in testdata nests 6, rackpool's own resources fewer than 10);
// 64 leaves room for OEM extensions and is far below where decoding costs
// more than reading.
const MaxDepth = 64

// DepthError says a document nests deeper than Limit, at byte Offset (the
// bracket that went one level too deep).
type DepthError struct {
	Limit  int
	Offset int64
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("JSON nests deeper than %d levels of objects and arrays (at byte %d)", e.Limit, e.Offset)
}

// Check returns a *DepthError if data nests objects and arrays deeper than
// limit, nil otherwise. It checks nothing else: a malformed document is the
// decoder's to refuse, and Check never mistakes a bracket inside a string
// for one that nests. It reads each byte once and allocates nothing.
func Check(data []byte, limit int) error {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			// Skip the string: to the next quote not escaped.
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
			if depth > limit {
				return &DepthError{Limit: limit, Offset: int64(i)}
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
