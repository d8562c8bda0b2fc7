package odata

import (
	"bytes"
	"encoding/json"

	"rackpool/internal/rf"
)

// membersMark stands in for a page's Members while the rest is rendered.
const membersMark = "\x00rackpool-members\x00"

// RenderPage renders a shaped page as rf.WriteJSON would, except that each
// member takes one line of compact JSON: an expanded member rendered in
// process is already JSON (json.RawMessage) and is written as it is,
// rather than encoded again and re-indented with the page. On the P4
// pod that halves the encoding of a page of 1,000 expanded blocks, and a
// page of links is less than half the bytes. The page is written into
// out when it has room (a buffer kept for pages), else into a new one.
func RenderPage(v any, out []byte) (rf.Rendered, error) {
	body, ok := v.(map[string]any)
	members, isList := body["Members"].([]any)
	if !ok || !isList {
		return rf.Render(v)
	}
	page := make(map[string]any, len(body))
	for k, e := range body {
		page[k] = e
	}
	page["Members"] = membersMark
	head, err := rf.Render(page)
	if err != nil {
		return nil, err
	}
	mark, _ := json.Marshal(membersMark)
	at := bytes.Index(head, mark)
	if at < 0 || len(members) == 0 {
		return rf.Render(v)
	}
	size := len(head) + len(members)*8
	for _, m := range members {
		if raw, ok := m.(json.RawMessage); ok {
			size += len(raw)
		} else {
			size += 96 // a reference
		}
	}
	if cap(out) < size {
		out = make([]byte, 0, size)
	}
	out = append(out, head[:at]...)
	out = append(out, "[\n"...)
	for i, m := range members {
		raw, ok := m.(json.RawMessage)
		if !ok {
			if raw, err = json.Marshal(m); err != nil {
				return nil, err
			}
		}
		if i > 0 {
			out = append(out, ",\n"...)
		}
		out = append(out, "    "...)
		out = append(out, raw...)
	}
	out = append(out, "\n  ]"...)
	out = append(out, head[at+len(mark):]...)
	return rf.Rendered(out), nil
}
