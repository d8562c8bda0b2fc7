package redfish

import (
	"bytes"
	"io"

	"rackpool/internal/redfish/service"
)

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// randomHex returns n random bytes in hex.
func randomHex(n int) string { return service.RandomHex(n) }
