package odata

import (
	"fmt"
	"net/http"
	"testing"
)

// numbered is a collection of n members /redfish/v1/X/0 … /X/n-1 that
// renders each body, counting the bodies it renders.
type numbered struct {
	n, rendered int
}

func (c *numbered) Len() int          { return c.n }
func (c *numbered) Path(i int) string { return fmt.Sprintf("/redfish/v1/X/%d", i) }
func (c *numbered) Body(i int) any {
	c.rendered++
	return map[string]any{"@odata.id": c.Path(i), "Id": fmt.Sprint(i), "Even": i%2 == 0}
}

func shape(t *testing.T, raw string, c *Collection) map[string]any {
	t.Helper()
	q, p := Parse(raw)
	if p != nil {
		t.Fatalf("%s: %v", raw, p)
	}
	out, p := q.ShapeCollection(c, "/redfish/v1/X", func(string) Response { return Response{Status: http.StatusNotFound} }, nil)
	if p != nil {
		t.Fatalf("%s: %v", raw, p)
	}
	return normalize(out.(map[string]any))
}

func TestShapeCollectionPages(t *testing.T) {
	m := &numbered{n: 250_000}
	c := &Collection{Head: map[string]any{"@odata.id": "/redfish/v1/X", "Name": "X"}, Members: m}

	// No $top: at most MaxPage members, and a link to the rest.
	body := shape(t, "", c)
	if n := len(body["Members"].([]any)); n != MaxPage {
		t.Fatalf("%d members without $top, want %d", n, MaxPage)
	}
	if got := body["Members@odata.nextLink"]; got != fmt.Sprintf("/redfish/v1/X?$skip=%d", MaxPage) {
		t.Fatalf("nextLink %v", got)
	}
	if m.rendered != 0 {
		t.Fatalf("a page of links rendered %d bodies", m.rendered)
	}

	// A deep page with $expand renders its own members only.
	body = shape(t, "$skip=249990&$expand=.", c)
	if n := len(body["Members"].([]any)); n != 10 || m.rendered != 10 {
		t.Fatalf("%d members, %d rendered; want 10 and 10", n, m.rendered)
	}
	if _, ok := body["Members@odata.nextLink"]; ok {
		t.Fatalf("the last page links %v", body["Members@odata.nextLink"])
	}
	if body["Members@odata.count"].(interface{ String() string }).String() != "250000" {
		t.Fatalf("count %v", body["Members@odata.count"])
	}

	// PageSize is the page without $top; $top above MaxPage is MaxPage.
	c.PageSize = 7
	if n := len(shape(t, "", c)["Members"].([]any)); n != 7 {
		t.Fatalf("%d members with PageSize 7", n)
	}
	if n := len(shape(t, "$top=200000", c)["Members"].([]any)); n != MaxPage {
		t.Fatalf("%d members with $top=200000", n)
	}

	// An expanded collection inlines its members without $expand.
	c.Expanded = true
	m.rendered = 0
	body = shape(t, "$top=3", c)
	if first := body["Members"].([]any)[0].(map[string]any); first["Id"] != "0" || m.rendered != 3 {
		t.Fatalf("first member %v, %d rendered", first, m.rendered)
	}

	// $filter with no index reads every member once and pages the matches.
	c.Expanded, c.PageSize = false, 0
	m.n, m.rendered = 1000, 0
	body = shape(t, "$filter=Even%20eq%20true&$top=10&$skip=5", c)
	if got := body["Members@odata.count"].(interface{ String() string }).String(); got != "500" || m.rendered != 1000 {
		t.Fatalf("count %s, %d rendered", got, m.rendered)
	}
	if first := body["Members"].([]any)[0].(map[string]any)["@odata.id"]; first != "/redfish/v1/X/10" {
		t.Fatalf("first match on the page %v", first)
	}
}
