package cache

import "math"

// Number parsing with the exact semantics of memcached's safe_strto*
// helpers, which wrap C's strtol/strtoull on 64-bit Linux: leading
// whitespace and a sign are accepted, the number must end at whitespace or
// the end of the token, out-of-range values fail, and the 32-bit variants
// truncate (so "4294967297" parses as 1), as memcached does.

func isCSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r'
}

// scanC scans s like strtoull/strtoll's front end.
func scanC(s []byte) (neg bool, mag uint64, overflow bool, end int, ok bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if mag > (math.MaxUint64-d)/10 {
			overflow = true
		} else {
			mag = mag*10 + d
		}
		i++
	}
	if i == start {
		return false, 0, false, 0, false
	}
	return neg, mag, overflow, i, true
}

// endsOK reports whether a number ending at s[end] ends properly: at the end
// of the token (its NUL), at a NUL, or at whitespace.
func endsOK(s []byte, end int) bool {
	return end == len(s) || s[end] == 0 || isCSpace(s[end])
}

func hasMinus(s []byte) bool {
	for _, b := range s {
		if b == 0 {
			return false
		}
		if b == '-' {
			return true
		}
	}
	return false
}

// cStrtoull is safe_strtoull. With tail set, s is a stored value followed by
// "\r\n" in memcached's memory, so the end of s ends the number.
func cStrtoull(s []byte, tail bool) (uint64, bool) {
	_ = tail // the end of s ends the number either way
	neg, mag, overflow, end, ok := scanC(s)
	if !ok || overflow || !endsOK(s, end) {
		return 0, false
	}
	v := mag
	if neg {
		v = -mag
	}
	if int64(v) < 0 && hasMinus(s) {
		return 0, false
	}
	return v, true
}

// strtoull is safe_strtoull on a token.
func strtoull(tok []byte) (uint64, bool) { return cStrtoull(tok, false) }

// strtoul32 is safe_strtoul: an unsigned long, truncated to 32 bits.
func strtoul32(tok []byte) (uint32, bool) {
	v, ok := cStrtoull(tok, false)
	return uint32(v), ok
}

// strtol32 is safe_strtol: a signed long, truncated to 32 bits.
func strtol32(tok []byte) (int32, bool) {
	neg, mag, overflow, end, ok := scanC(tok)
	if !ok || overflow || !endsOK(tok, end) {
		return 0, false
	}
	var v int64
	if neg {
		if mag > 1<<63 {
			return 0, false
		}
		v = int64(-mag)
	} else {
		if mag > math.MaxInt64 {
			return 0, false
		}
		v = int64(mag)
	}
	return int32(v), true
}
