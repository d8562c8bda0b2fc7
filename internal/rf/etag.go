package rf

import (
	"crypto/sha1"
	"fmt"
	"strings"
)

// ETagMatches reports whether list, the comma-separated value of an
// If-Match or If-None-Match header, holds "*" or a tag weakly equal to tag
// (RFC 9110 §8.8.3.2: W/ ignored). Quotes are optional, as clients that
// quote nothing send them. An empty tag (the resource has none) matches
// nothing.
func ETagMatches(list, tag string) bool {
	if tag == "" {
		return false
	}
	want := opaqueTag(tag)
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || (t != "" && opaqueTag(t) == want) {
			return true
		}
	}
	return false
}

// opaqueTag is an entity tag without W/ and quotes.
func opaqueTag(t string) string { return strings.Trim(strings.TrimPrefix(t, "W/"), `"`) }

// ServiceUUID is a stable UUID (version 5 layout) derived from name: a
// service's ServiceRoot UUID, the same on every start.
func ServiceUUID(name string) string {
	h := []byte(fmt.Sprintf("%x", sha1.Sum([]byte(name))))
	return fmt.Sprintf("%s-%s-5%s-a%s-%s", h[0:8], h[8:12], h[13:16], h[17:20], h[20:32])
}
