package telemetry

import "errors"

// Errors of Append and AppendAll. Each is wrapped with the series and the
// sample at fault; a refused push changed nothing.
var (
	// ErrInvalid: a key without a known kind or a source, a value that is
	// NaN, infinite or negative, a zero time, an empty push, or a series
	// given twice in one push.
	ErrInvalid = errors.New("invalid telemetry sample")
	// ErrUnknownMetric: the metric is not in the table of its kind
	// (Metrics).
	ErrUnknownMetric = errors.New("unknown metric")
	// ErrOutOfOrder: times do not increase within the push, or a sample
	// is at or before the series' newest one without repeating it.
	ErrOutOfOrder = errors.New("samples out of order")
	// ErrFuture: a sample's time is ahead of the store's clock by more
	// than Options.MaxSkew.
	ErrFuture = errors.New("sample time in the future")
	// ErrTooOld: a sample's time is before the retention window.
	ErrTooOld = errors.New("sample older than the retention")
	// ErrTooManySamples: one push holds more samples for a series than
	// the series keeps.
	ErrTooManySamples = errors.New("too many samples in one push")
	// ErrTooManySeries: the push would create series beyond
	// Options.MaxSeries.
	ErrTooManySeries = errors.New("too many telemetry series")
	// ErrNotStored: the push could not be written to the store before it
	// was acknowledged (write-through, see the package doc); nothing of it
	// was kept. The store's error is wrapped too (store.ErrUnavailable
	// when the database cannot be reached).
	ErrNotStored = errors.New("telemetry samples not stored")
	// ErrCorrupt: a stored segment does not decode.
	ErrCorrupt = errors.New("corrupt telemetry segment")
)
