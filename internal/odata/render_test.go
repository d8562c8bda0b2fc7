package odata

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"rackpool/internal/rf"
)

// TestRenderPage: a page rendered with one line per member reads back as
// the same JSON as the page rendered whole, whatever its members are.
func TestRenderPage(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"@odata.id": "/redfish/v1/X/1", "Name": "a <b> & c", "N": 1})
	for name, members := range map[string][]any{
		"references": {rf.Ref("/redfish/v1/X/1"), rf.Ref("/redfish/v1/X/2")},
		"rendered":   {json.RawMessage(raw), json.RawMessage(raw)},
		"maps":       {map[string]any{"@odata.id": "/redfish/v1/X/3", "Members": []any{"a"}}},
		"mixed":      {rf.Ref("/redfish/v1/X/1"), json.RawMessage(raw), map[string]any{"Id": "3"}},
		"empty":      {},
	} {
		body := map[string]any{"@odata.id": "/redfish/v1/X", "Name": "X", "Members": members, "Members@odata.count": len(members)}
		page, err := RenderPage(body, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		whole, err := rf.Render(body)
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(page, &got); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, page)
		}
		if err := json.Unmarshal(whole, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n%s\nwant\n%s", name, page, whole)
		}
		if !bytes.HasSuffix(page, []byte("}\n")) || strings.Contains(string(page), "\\u0000rackpool") {
			t.Fatalf("%s: %s", name, page)
		}
		if n := len(members); n > 0 && bytes.Count(page, []byte("\n    ")) < n {
			t.Fatalf("%s: members not one a line:\n%s", name, page)
		}
	}
}
