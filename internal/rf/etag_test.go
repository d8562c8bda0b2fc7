package rf

import (
	"regexp"
	"testing"
)

func TestETagMatches(t *testing.T) {
	for _, tc := range []struct {
		list, tag string
		want      bool
	}{
		{`"abc"`, `"abc"`, true},
		{`W/"abc"`, `"abc"`, true},
		{`"abc"`, `W/"abc"`, true},
		{`abc`, `"abc"`, true},
		{`"x", "abc"`, `"abc"`, true},
		{`*`, `"abc"`, true},
		{`"x",,"y"`, `"abc"`, false},
		{`"abd"`, `"abc"`, false},
		{`*`, ``, false},
		{``, `"abc"`, false},
	} {
		if got := ETagMatches(tc.list, tc.tag); got != tc.want {
			t.Errorf("ETagMatches(%q, %q) = %v, want %v", tc.list, tc.tag, got, tc.want)
		}
	}
}

func TestServiceUUID(t *testing.T) {
	a, b := ServiceUUID("rackpool:rack1"), ServiceUUID("rackpool:rack2")
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuid.MatchString(a) || a == b || ServiceUUID("rackpool:rack1") != a {
		t.Errorf("ServiceUUID: %s, %s", a, b)
	}
}
