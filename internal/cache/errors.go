package cache

import "errors"

// Errors returned by New and the remote tier.
var (
	// ErrBadOptions is wrapped by New when Options fail validation.
	ErrBadOptions = errors.New("cache: bad options")

	// errRecordTooLarge means an item does not fit in one remote segment; it
	// is dropped instead of spilled.
	errRecordTooLarge = errors.New("cache: record larger than a remote segment")
	// errMoved means a remote record was relocated (or its segment recycled)
	// between the index lookup and the read; the reader looks it up again.
	errMoved = errors.New("cache: remote record moved")
	// errCorrupt means a remote record failed verification (magic, key, CAS,
	// lengths or CRC32-C).
	errCorrupt = errors.New("cache: remote record failed verification")
)
