package slurm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxHostlist bounds what one hostlist may expand to.
const maxHostlist = 1 << 16

// ExpandHostlist expands a Slurm hostlist: "n[1-3,5],gpu01,m[08-10]" is
// n1 n2 n3 n5 gpu01 m08 m09 m10 (zero padding kept). One bracket per name,
// as slurmctld writes them for one dimension.
func ExpandHostlist(list string) ([]string, error) {
	var out []string
	for _, item := range splitTop(list) {
		if item == "" {
			continue
		}
		open := strings.IndexByte(item, '[')
		if open < 0 {
			out = append(out, item)
			continue
		}
		end := strings.IndexByte(item, ']')
		if end < open || strings.Count(item, "[") != 1 {
			return nil, fmt.Errorf("hostlist %q: bad brackets in %q", list, item)
		}
		prefix, suffix := item[:open], item[end+1:]
		for _, r := range strings.Split(item[open+1:end], ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a > b || a < 0 {
				return nil, fmt.Errorf("hostlist %q: bad range %q", list, r)
			}
			if len(out)+b-a+1 > maxHostlist {
				return nil, fmt.Errorf("hostlist %q: more than %d names", list, maxHostlist)
			}
			for i := a; i <= b; i++ {
				out = append(out, fmt.Sprintf("%s%0*d%s", prefix, len(lo), i, suffix))
			}
		}
	}
	return out, nil
}

// splitTop splits at the commas outside brackets.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// ConstraintFeatures are the features a job's constraint asks for all of:
// "gpu2&nvme" and "gpu2,nvme" are both, "[gpu2|nvme]" and "gpu2|nvme" the
// first alternative (rackpool composes one; docs/slurm.md), "gpu2*2" gpu2.
func ConstraintFeatures(constraint string) []string {
	c := strings.TrimSpace(constraint)
	if c == "(null)" {
		return nil
	}
	c = strings.Trim(c, "[]()")
	if alt, _, ok := strings.Cut(c, "|"); ok {
		c = alt
	}
	var out []string
	for _, f := range strings.FieldsFunc(c, func(r rune) bool { return r == '&' || r == ',' || r == '[' || r == ']' || r == '(' || r == ')' }) {
		f, _, _ = strings.Cut(f, "*")
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}
