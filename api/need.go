package api

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseNeed reads a need as the CLI and configuration files write it:
// "2 gpu model=V100", "64GiB memory", "1 nvme capacity=3TB
// max-latency=2000 generation=ampere".
func ParseNeed(spec string) (Need, error) {
	f := strings.Fields(spec)
	if len(f) < 2 {
		return Need{}, fmt.Errorf("need %q: want \"COUNT KIND [key=value...]\" or \"SIZE memory\"", spec)
	}
	n := Need{Kind: strings.ToLower(f[1])}
	if count, err := strconv.Atoi(f[0]); err == nil {
		if count < 1 {
			return n, fmt.Errorf("need %q: count must be at least 1", spec)
		}
		n.Count = count
	} else if n.Kind == "memory" {
		n.Capacity = f[0]
	} else {
		return n, fmt.Errorf("need %q: %q is not a count", spec, f[0])
	}
	for _, kv := range f[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return n, fmt.Errorf("need %q: %q is not key=value", spec, kv)
		}
		switch k {
		case "model":
			n.Model = v
		case "capacity":
			n.Capacity = v
		case "max-latency":
			ns, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return n, fmt.Errorf("need %q: max-latency %q is not a number of nanoseconds", spec, v)
			}
			n.MaxLatencyNS = ns
		default:
			if n.Attributes == nil {
				n.Attributes = map[string]string{}
			}
			n.Attributes[k] = v
		}
	}
	return n, nil
}
