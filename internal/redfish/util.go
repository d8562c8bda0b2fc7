package redfish

import (
	"rackpool/internal/redfish/service"
)

// randomHex returns n random bytes in hex.
func randomHex(n int) string { return service.RandomHex(n) }
