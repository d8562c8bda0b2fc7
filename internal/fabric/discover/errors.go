package discover

import "errors"

// Errors Walk and the HTTP getter return, wrapped with the URL and what was
// wrong ("GET /redfish/v1/Fabrics/CXL: ...: resource limit"). Test them with
// errors.Is.
var (
	// ErrNotFound: the service answered 404 for a resource. Walk tolerates
	// it for links it follows only to learn more (a drive's media type, a
	// system's cores) and records a note; a missing member of a fabric's
	// collections is an error.
	ErrNotFound = errors.New("not found")

	// ErrMalformed: a body that is not a JSON object, a property of the
	// wrong type, a link without @odata.id, a link outside /redfish/v1, or
	// a resource of another type than the link promised.
	ErrMalformed = errors.New("malformed resource")

	// ErrTooLarge: a body over Options.MaxBodyBytes.
	ErrTooLarge = errors.New("body too large")

	// ErrTooMany: the walk would read more than Options.MaxResources
	// resources.
	ErrTooMany = errors.New("too many resources")

	// ErrCycle: a collection that contains itself or one of the resources
	// above it, or a page chain (Members@odata.nextLink) that comes back to
	// a page already read.
	ErrCycle = errors.New("link cycle")

	// ErrUnknownFabric: Options.Fabrics names a fabric the service does not
	// have.
	ErrUnknownFabric = errors.New("unknown fabric")
)
