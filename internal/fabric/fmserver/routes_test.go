package fmserver

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestRouteTable: every route is a literal "METHOD /redfish…" pattern,
// registered once, and all but the documents a client reads before it
// logs in (and the login itself) need the account: without credentials
// each answers 401 NoValidSession, whatever its path's wildcards name.
func TestRouteTable(t *testing.T) {
	f := newFM(t, rackTopology(t), "falcon1", Options{})
	publicRoutes := []string{"GET /redfish", "GET /redfish/v1", "GET /redfish/v1/{$}", "GET /redfish/v1/$metadata",
		"GET /redfish/v1/odata", "GET /redfish/v1/Schemas/Rackpool_v1.xml", "POST /redfish/v1/SessionService/Sessions"}
	literal := regexp.MustCompile(`^(GET|POST|PATCH|DELETE) /redfish(/v1(/[A-Za-z0-9_.$#{}-]+)*)?$`)
	seen := map[string]bool{}
	for _, rt := range routeTable {
		if !literal.MatchString(rt.pattern) || seen[rt.pattern] {
			t.Errorf("route %q: not a literal pattern, or registered twice", rt.pattern)
		}
		seen[rt.pattern] = true
		if (rt.priv == public) != slices.Contains(publicRoutes, rt.pattern) {
			t.Errorf("route %q: privilege %q", rt.pattern, rt.priv)
		}
		if rt.priv == public {
			continue
		}
		method, path, _ := strings.Cut(rt.pattern, " ")
		path = regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "x")
		res := f.raw(method, path, "{}", map[string]string{"X-Auth-Token": ""})
		if res.status != http.StatusUnauthorized || !slices.Contains(messageIDs(res), baseRegistry+"NoValidSession") {
			t.Errorf("%s %s without credentials: %d %s", method, path, res.status, res.body)
		}
	}
	if len(seen) != len(routeTable) {
		t.Errorf("%d routes, %d distinct", len(routeTable), len(seen))
	}
}
