package demand

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode"
)

// Column names of a trace file. The first three come first, in this order;
// the optional ones follow in any order, each at most once.
const (
	ColumnTime   = "time_s"     // seconds since any fixed origin, ≥ 0
	ColumnEntity = "entity"     // the consumer: a node, a VM, a process tree
	ColumnMemory = "memory_gib" // memory in use, GiB (2^30 bytes)
	ColumnGPUs   = "gpus"       // optional: GPUs in use (may be fractional)
	ColumnIO     = "io_mbps"    // optional: IO bandwidth in use, MB/s (10^6 bytes)
)

// StepTolerance is how far, as a fraction of the interval, a time step may
// differ from the trace's interval (and a series' last sample from its grid
// time) before Read calls it a gap or a drift.
const StepTolerance = 0.01

// MaxIntervals is how many intervals after time 0 a trace may reach: times
// and the interval must keep 8 significant digits apart for the interval to
// be measured exactly. Write times relative to the start of the recording
// rather than as Unix times with a short interval.
const MaxIntervals = 1e8

// Default limits of Read (see Limits).
const (
	DefaultMaxRows     = 10_000_000
	DefaultMaxEntities = 100_000
	maxLineBytes       = 64 << 10
)

// ErrLimit is wrapped by the errors Read returns for a trace larger than
// its Limits.
var ErrLimit = errors.New("trace too large")

// Trace is a set of demand series sampled on one time grid.
type Trace struct {
	// Interval is the time between two consecutive samples of a series,
	// in seconds, shared by every series. It is 0 only when no series has
	// two samples (a file cannot say more); otherwise it has at most 6
	// significant digits (Read measures it and rounds it to those).
	Interval float64
	// Entities holds one series per entity, in the order of their first
	// row in the file.
	Entities []Series
}

// Series is one entity's demand: sample i was taken at Start + i×Interval.
// MemoryGiB always has at least one sample; GPUs and IOMBps are nil when
// the trace has no such column, else as long as MemoryGiB. Every value is
// finite and ≥ 0.
type Series struct {
	Entity    string
	Start     float64 // seconds
	MemoryGiB []float64
	GPUs      []float64
	IOMBps    []float64
}

// Len returns the number of samples of the series.
func (s *Series) Len() int { return len(s.MemoryGiB) }

// End returns the time of the last sample of series s of t.
func (t *Trace) End(s *Series) float64 { return s.Start + float64(s.Len()-1)*t.Interval }

// Aggregate returns the sum of every series' memory on the trace's grid:
// slot k is at start + k×Interval, start being the earliest series start,
// and each sample is added to the slot nearest its time (series need not
// start a whole number of intervals apart). A slot no series covers is 0.
// With Interval 0 every sample is added to the one slot.
func (t *Trace) Aggregate() (start float64, gib []float64) {
	if len(t.Entities) == 0 {
		return 0, nil
	}
	start = math.Inf(1)
	for i := range t.Entities {
		start = min(start, t.Entities[i].Start)
	}
	offset := func(s *Series) int {
		if t.Interval == 0 {
			return 0
		}
		return int(math.Round((s.Start - start) / t.Interval))
	}
	n := 0
	for i := range t.Entities {
		s := &t.Entities[i]
		if t.Interval == 0 {
			n = 1
			break
		}
		n = max(n, offset(s)+s.Len())
	}
	gib = make([]float64, n)
	for i := range t.Entities {
		s := &t.Entities[i]
		o := offset(s)
		for k, v := range s.MemoryGiB {
			if t.Interval == 0 {
				gib[0] += v
				continue
			}
			gib[o+k] += v
		}
	}
	return start, gib
}

// PeakToAverage returns max(xs)/mean(xs), or 0 when xs is empty or its
// mean is 0.
func PeakToAverage(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	peak, sum := math.Inf(-1), 0.0
	for _, x := range xs {
		peak = max(peak, x)
		sum += x
	}
	if sum == 0 {
		return 0
	}
	return peak / (sum / float64(len(xs)))
}

// ParseError is the error Read returns for a malformed trace: the file's
// name, the 1-based line, the column when one is at fault, and what is
// wrong.
type ParseError struct {
	Name   string
	Line   int    // 0 when the problem is the file as a whole
	Column string // "" when no one column is at fault
	Err    error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.Name)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Column != "" {
		b.WriteString("column " + e.Column + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

// Limits bounds what Read accepts, so that a huge or hostile file is
// refused with an error instead of taking all memory. The zero value means
// the defaults.
type Limits struct {
	MaxRows     int // samples (rows after the header); default DefaultMaxRows
	MaxEntities int // distinct entities; default DefaultMaxEntities
}

// Read reads a trace in CSV from r with the default Limits; name is used in
// error messages (the file name, say).
func Read(r io.Reader, name string) (*Trace, error) { return Limits{}.Read(r, name) }

// ReadFile reads the trace file at path with the default Limits.
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(bufio.NewReader(f), path)
}

// entityState is what Read keeps per entity while reading.
type entityState struct {
	index    int
	last     float64 // time of the last sample
	lastLine int
}

// Read reads a trace in CSV from r; name is used in error messages.
//
// The rules, each broken one an error naming the line and column:
//   - The header is time_s,entity,memory_gib, then any of gpus and io_mbps
//     in any order, each at most once; any other column is an error.
//   - Every row has as many columns as the header. Blank lines are
//     skipped; fields may be quoted as CSV allows and have surrounding
//     spaces trimmed; a line is at most 64 KiB.
//   - Numbers are decimal (as strconv.ParseFloat reads them), finite and
//     ≥ 0. The entity is not blank and has no control characters.
//   - Rows of one entity are in time order (entities may interleave), with
//     no duplicate time and a constant step: the trace's interval, set by
//     the first step in the file and shared by every entity. A step more
//     than StepTolerance of the interval away from it is an error (a gap
//     when it is longer). Entities may start at different times.
//   - The interval is then measured over the longest series ((last −
//     first)/(samples − 1), rounded to 6 significant digits); each series'
//     last sample must lie within StepTolerance intervals of its grid time
//     (no drift), and the trace must end within MaxIntervals intervals of
//     time 0.
//   - There is at least one row, and no more rows or entities than l
//     allows (errors wrapping ErrLimit).
//
// Times are then those of the grid: sample i of a series is at Start +
// i×Interval, Start being the series' first time as written.
func (l Limits) Read(r io.Reader, name string) (*Trace, error) {
	maxRows, maxEntities := l.MaxRows, l.MaxEntities
	if maxRows <= 0 {
		maxRows = DefaultMaxRows
	}
	if maxEntities <= 0 {
		maxEntities = DefaultMaxEntities
	}
	lr := &lineLimiter{r: r, max: maxLineBytes}
	cr := csv.NewReader(lr)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	lastLine := 0
	fail := func(line int, col string, format string, args ...any) error {
		return &ParseError{Name: name, Line: line, Column: col, Err: fmt.Errorf(format, args...)}
	}
	readErr := func(err error) error {
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe):
			return &ParseError{Name: name, Line: pe.Line, Err: pe.Err}
		case errors.Is(err, errLineTooLong):
			return &ParseError{Name: name, Line: lastLine + 1, Err: err}
		}
		return fmt.Errorf("%s: %w", name, err)
	}

	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{Name: name, Err: errors.New("empty file, want a header time_s,entity,memory_gib")}
	}
	if err != nil {
		return nil, readErr(err)
	}
	headerLine, _ := cr.FieldPos(0)
	lastLine = headerLine
	cols := make([]string, len(header))
	for i, h := range header {
		cols[i] = strings.TrimSpace(h)
	}
	cols[0] = strings.TrimPrefix(cols[0], "\ufeff")
	if len(cols) < 3 || cols[0] != ColumnTime || cols[1] != ColumnEntity || cols[2] != ColumnMemory {
		return nil, fail(headerLine, "", "header %q must start with time_s,entity,memory_gib", strings.Join(cols, ","))
	}
	gpuCol, ioCol := -1, -1
	for i := 3; i < len(cols); i++ {
		switch cols[i] {
		case ColumnGPUs:
			if gpuCol >= 0 {
				return nil, fail(headerLine, "", "column %q appears twice", cols[i])
			}
			gpuCol = i
		case ColumnIO:
			if ioCol >= 0 {
				return nil, fail(headerLine, "", "column %q appears twice", cols[i])
			}
			ioCol = i
		default:
			return nil, fail(headerLine, "", "unknown column %q (after memory_gib: gpus, io_mbps)", cols[i])
		}
	}

	t := &Trace{}
	states := map[string]*entityState{}
	rows := 0
	interval, intervalLine := 0.0, 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, readErr(err)
		}
		line, _ := cr.FieldPos(0)
		lastLine = line
		if rows++; rows > maxRows {
			return nil, fail(line, "", "more than %d rows: %w", maxRows, ErrLimit)
		}
		if len(rec) != len(cols) {
			return nil, fail(line, "", "%d columns, want %d (%s)", len(rec), len(cols), strings.Join(cols, ","))
		}
		var vals [5]float64
		for i, c := range cols {
			if i == 1 {
				continue
			}
			v, err := parseValue(rec[i])
			if err != nil {
				return nil, fail(line, c, "%w", err)
			}
			vals[i] = v
		}
		tm := vals[0]
		entity := strings.TrimSpace(rec[1])
		if entity == "" {
			return nil, fail(line, ColumnEntity, "empty")
		}
		if strings.ContainsFunc(entity, unicode.IsControl) {
			return nil, fail(line, ColumnEntity, "%q has a control character", entity)
		}
		st := states[entity]
		if st == nil {
			if len(t.Entities) == maxEntities {
				return nil, fail(line, ColumnEntity, "more than %d entities: %w", maxEntities, ErrLimit)
			}
			st = &entityState{index: len(t.Entities)}
			states[entity] = st
			s := Series{Entity: entity, Start: tm}
			if gpuCol >= 0 {
				s.GPUs = []float64{}
			}
			if ioCol >= 0 {
				s.IOMBps = []float64{}
			}
			t.Entities = append(t.Entities, s)
		} else {
			step := tm - st.last
			switch {
			case step < 0:
				return nil, fail(line, ColumnTime, "time goes backwards: %s is before %q's previous sample at %s (line %d)",
					formatNumber(tm), entity, formatNumber(st.last), st.lastLine)
			case step == 0:
				return nil, fail(line, ColumnTime, "duplicate time %s for %q (also line %d)", formatNumber(tm), entity, st.lastLine)
			case interval == 0:
				interval, intervalLine = step, line
			case math.Abs(step-interval) > StepTolerance*interval:
				if k := math.Round(step / interval); k >= 2 && math.Abs(step-k*interval) <= StepTolerance*interval {
					return nil, fail(line, ColumnTime, "gap: %.6g s since %q's previous sample (line %d), %d samples missing at the trace's interval of %.6g s (set by line %d)",
						step, entity, st.lastLine, int(k)-1, interval, intervalLine)
				}
				return nil, fail(line, ColumnTime, "step of %.6g s since %q's previous sample (line %d) differs from the trace's interval of %.6g s (set by line %d)",
					step, entity, st.lastLine, interval, intervalLine)
			}
		}
		st.last, st.lastLine = tm, line
		s := &t.Entities[st.index]
		s.MemoryGiB = append(s.MemoryGiB, vals[2])
		if gpuCol >= 0 {
			s.GPUs = append(s.GPUs, vals[gpuCol])
		}
		if ioCol >= 0 {
			s.IOMBps = append(s.IOMBps, vals[ioCol])
		}
	}
	if rows == 0 {
		return nil, &ParseError{Name: name, Err: errors.New("no samples after the header")}
	}

	// The interval over the longest series; every series must stay on
	// its grid.
	longest := 0
	for i := range t.Entities {
		if t.Entities[i].Len() > t.Entities[longest].Len() {
			longest = i
		}
	}
	if s := &t.Entities[longest]; s.Len() > 1 {
		last := states[s.Entity].last
		t.Interval = roundInterval((last - s.Start) / float64(s.Len()-1))
	}
	end := 0.0
	for i := range t.Entities {
		s := &t.Entities[i]
		st := states[s.Entity]
		grid := t.End(s)
		if math.Abs(st.last-grid) > StepTolerance*t.Interval {
			return nil, fail(st.lastLine, ColumnTime, "%q drifts off the trace's grid: its sample %d at %s s is %.3g s from %.6g s (start %s + %d × interval %s)",
				s.Entity, s.Len()-1, formatNumber(st.last), math.Abs(st.last-grid), grid,
				formatNumber(s.Start), s.Len()-1, formatNumber(t.Interval))
		}
		end = max(end, grid)
	}
	if t.Interval > 0 && end > MaxIntervals*t.Interval {
		return nil, &ParseError{Name: name, Err: fmt.Errorf("times reach %.6g s at an interval of %s s, more than %g intervals: write times relative to the start of the trace",
			end, formatNumber(t.Interval), float64(MaxIntervals))}
	}
	return t, nil
}

// parseValue parses one numeric field: finite and ≥ 0.
func parseValue(field string) (float64, error) {
	f := strings.TrimSpace(field)
	v, err := strconv.ParseFloat(f, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a number", f)
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("%q is not finite", f)
	case v < 0:
		return 0, fmt.Errorf("%q is negative", f)
	}
	return v, nil
}

// roundInterval rounds a measured interval to 6 significant digits.
func roundInterval(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 6, 64), 64)
	return v
}

// formatNumber writes v in the shortest form that reads back exactly,
// without an exponent for everyday magnitudes.
func formatNumber(v float64) string {
	if a := math.Abs(v); v == 0 || a >= 1e-4 && a < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Validate reports whether Write can write t so that Read gives it back
// exactly: at least one series, distinct valid entity names, at least one
// sample per series, finite values ≥ 0, the optional columns present in
// every series or in none and as long as MemoryGiB, and an interval that
// is 0 exactly when no series has two samples, has at most 6 significant
// digits and keeps the trace within MaxIntervals intervals of time 0.
func (t *Trace) Validate() error {
	if len(t.Entities) == 0 {
		return errors.New("trace has no series")
	}
	iv := t.Interval
	if math.IsNaN(iv) || math.IsInf(iv, 0) || iv < 0 {
		return fmt.Errorf("interval %v: want a finite number ≥ 0", iv)
	}
	if iv != roundInterval(iv) {
		return fmt.Errorf("interval %v has more than 6 significant digits (a file's interval is measured to 6)", iv)
	}
	multi := false
	seen := make(map[string]bool, len(t.Entities))
	gpus, io := t.Entities[0].GPUs != nil, t.Entities[0].IOMBps != nil
	end := 0.0
	for i := range t.Entities {
		s := &t.Entities[i]
		switch {
		case strings.TrimSpace(s.Entity) != s.Entity || s.Entity == "":
			return fmt.Errorf("series %d: entity %q is empty or has surrounding spaces", i, s.Entity)
		case strings.ContainsFunc(s.Entity, unicode.IsControl):
			return fmt.Errorf("series %d: entity %q has a control character", i, s.Entity)
		case seen[s.Entity]:
			return fmt.Errorf("series %d: entity %q appears twice", i, s.Entity)
		case s.Len() == 0:
			return fmt.Errorf("entity %q has no samples", s.Entity)
		case math.IsNaN(s.Start) || math.IsInf(s.Start, 0) || s.Start < 0:
			return fmt.Errorf("entity %q: start %v: want a finite number ≥ 0", s.Entity, s.Start)
		case (s.GPUs != nil) != gpus || (s.IOMBps != nil) != io:
			return fmt.Errorf("entity %q: gpus and io_mbps must be present in every series or in none", s.Entity)
		case gpus && len(s.GPUs) != s.Len() || io && len(s.IOMBps) != s.Len():
			return fmt.Errorf("entity %q: gpus or io_mbps has a different length than memory_gib", s.Entity)
		}
		seen[s.Entity] = true
		multi = multi || s.Len() > 1
		for _, col := range []struct {
			name string
			vals []float64
		}{{ColumnMemory, s.MemoryGiB}, {ColumnGPUs, s.GPUs}, {ColumnIO, s.IOMBps}} {
			for k, v := range col.vals {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					return fmt.Errorf("entity %q: %s[%d] = %v: want a finite number ≥ 0", s.Entity, col.name, k, v)
				}
			}
		}
		end = max(end, t.End(s))
	}
	switch {
	case multi && iv == 0:
		return errors.New("interval 0 with series of more than one sample")
	case !multi && iv != 0:
		return fmt.Errorf("interval %v but no series has two samples (a file cannot carry it)", iv)
	case iv > 0 && end > MaxIntervals*iv:
		return fmt.Errorf("the trace reaches %v s at an interval of %v s, more than %g intervals", end, iv, float64(MaxIntervals))
	}
	return nil
}

// Write writes t as CSV, each series' rows together in the order of
// Entities, with the gpus and io_mbps columns when the series have them.
// Times are Start + i×Interval (see gridTime) and values the shortest text
// that reads back exactly, so Read gives t back. Write refuses a trace that does not
// Validate.
func Write(w io.Writer, t *Trace) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	bw := bufio.NewWriter(w)
	cw := csv.NewWriter(bw)
	header := []string{ColumnTime, ColumnEntity, ColumnMemory}
	gpus, io := t.Entities[0].GPUs != nil, t.Entities[0].IOMBps != nil
	if gpus {
		header = append(header, ColumnGPUs)
	}
	if io {
		header = append(header, ColumnIO)
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	rec := make([]string, len(header))
	for i := range t.Entities {
		s := &t.Entities[i]
		for k, v := range s.MemoryGiB {
			rec = rec[:0]
			rec = append(rec, formatNumber(gridTime(s.Start, t.Interval, k)), s.Entity, formatNumber(v))
			if gpus {
				rec = append(rec, formatNumber(s.GPUs[k]))
			}
			if io {
				rec = append(rec, formatNumber(s.IOMBps[k]))
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

// gridTime is the time Write writes for sample k of a series: Start +
// k×interval, rounded to 8 decimal digits below the interval's first
// significant one (so 0.1×3 is written 0.3, not 0.30000000000000004),
// which moves it by at most 10^-8 intervals: Read measures the same
// interval and puts the sample at the same index.
func gridTime(start, interval float64, k int) float64 {
	t := start + float64(k)*interval
	if k == 0 || interval <= 0 {
		return t
	}
	p := math.Pow(10, float64(max(0, int(math.Ceil(-math.Log10(interval)))+8)))
	if math.IsInf(p, 0) || t*p > 1e15 {
		return t
	}
	return math.Round(t*p) / p
}

// WriteFile writes t to path, through a temporary file renamed into place.
func WriteFile(path string, t *Trace) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := Write(f, t); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

var errLineTooLong = fmt.Errorf("line longer than %d bytes", maxLineBytes)

// lineLimiter fails a read once a line grows past max bytes, so that a
// file without newlines cannot make the CSV reader buffer all of it.
type lineLimiter struct {
	r   io.Reader
	max int
	n   int // bytes since the last newline
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			l.n = 0
			continue
		}
		if l.n++; l.n > l.max {
			return 0, errLineTooLong
		}
	}
	return n, err
}
