package client

import (
	"reflect"
	"strings"
	"testing"

	"rackpool/api"
)

// TestParseNeed: a need SPEC is "COUNT KIND [key=value...]" or "SIZE
// memory"; the known keys fill their fields, others are attributes.
func TestParseNeed(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want api.Need
		err  string // a part of the error, "" for none
	}{
		{"2 gpu model=V100", api.Need{Kind: "gpu", Count: 2, Model: "V100"}, ""},
		{"64GiB memory", api.Need{Kind: "memory", Capacity: "64GiB"}, ""},
		{"1 NVMe capacity=3TB max-latency=2000 generation=ampere",
			api.Need{Kind: "nvme", Count: 1, Capacity: "3TB", MaxLatencyNS: 2000, Attributes: map[string]string{"generation": "ampere"}}, ""},
		{"gpu", api.Need{}, `want "COUNT KIND`},
		{"0 gpu", api.Need{}, "count must be at least 1"},
		{"two gpu", api.Need{}, `"two" is not a count`},
		{"1 gpu model", api.Need{}, `"model" is not key=value`},
		{"1 nvme max-latency=soon", api.Need{}, "not a number of nanoseconds"},
	} {
		got, err := api.ParseNeed(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("api.ParseNeed(%q): %v, want an error with %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("api.ParseNeed(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
}

// TestComposeNeedsSomething: compose without blocks, needs or a host is a
// usage error, before any request.
func TestComposeNeedsSomething(t *testing.T) {
	f := &fakeService{}
	url := f.start(t)
	err := execute("compose", "--url", url, "--name", "x")
	if err == nil || !strings.Contains(err.Error(), "name blocks, --need or --host") {
		t.Errorf("compose with nothing: %v", err)
	}
	if len(f.reqs) != 0 {
		t.Errorf("sent %q", f.reqs)
	}
}
