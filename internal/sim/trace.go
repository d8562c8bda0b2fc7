package sim

// This file reads and writes request traces: CSV files with a header row,
// one request a row, sorted by arrival.
//
//	id,arrival,cores,ram_gb,hold,gpus,storage_gb,max_latency_ns
//	vm1,0,4,16,3600,0,0,0
//	vm2,2.5,2,8,1800,1,100,500
//
// The columns id, arrival, cores, ram_gb and hold are required, in any
// order; gpus, storage_gb, max_latency_ns and min_bandwidth_gbps are
// optional (an empty cell in an optional column is 0). Errors name the
// file, the line and the column:
//
//	trace.csv:17: hold: must be a finite number >= 0, got "-3"

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// LineError is a bad value at a line of an input file (a trace or a
// scenario).
type LineError struct {
	File  string
	Line  int
	Field string // the column or key; "" when the error is about a whole line
	Msg   string
}

// Error formats e as "file:line: field: message".
func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// Trace columns.
const (
	colID               = "id"
	colArrival          = "arrival"
	colCores            = "cores"
	colRAMGB            = "ram_gb"
	colHold             = "hold"
	colGPUs             = "gpus"
	colStorageGB        = "storage_gb"
	colMaxLatencyNS     = "max_latency_ns"
	colMinBandwidthGbps = "min_bandwidth_gbps"
)

// TraceColumns are the columns of a trace file: the first five are
// required, the rest optional.
var TraceColumns = []string{colID, colArrival, colCores, colRAMGB, colHold,
	colGPUs, colStorageGB, colMaxLatencyNS, colMinBandwidthGbps}

// traceRequired is how many of TraceColumns a trace must have.
const traceRequired = 5

// maxTraceCount bounds the integer columns (cores, gpus) of one request.
const maxTraceCount = 1_000_000

// ReadTrace reads the trace file at path (see ParseTrace).
func ReadTrace(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sim: read trace: %w", err)
	}
	defer f.Close()
	var size int64
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return parseTrace(path, f, size)
}

// ParseTrace reads a CSV trace from r; name is the file's name in errors.
// The first non-blank row is the header; every other row is one request.
// Rows must be sorted by arrival and ids must be unique. A UTF-8 byte
// order mark, CRLF line ends and blank lines are accepted.
func ParseTrace(name string, r io.Reader) ([]Request, error) {
	var size int64
	if l, ok := r.(interface{ Len() int }); ok {
		size = int64(l.Len())
	}
	return parseTrace(name, r, size)
}

// parseTrace is ParseTrace; size, when > 0, is the input's length in
// bytes, which sizes the result up front.
func parseTrace(name string, r io.Reader, size int64) ([]Request, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if bom, err := br.Peek(3); err == nil && string(bom) == "\uFEFF" {
		_, _ = br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1 // counted below, for a clearer message
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true

	p := traceParser{name: name, cr: cr}
	header, err := p.next()
	if err == io.EOF {
		return nil, &LineError{File: name, Line: 1, Field: "header",
			Msg: "empty file (want a header row: " + strings.Join(TraceColumns[:traceRequired], ",") + ")"}
	}
	if err != nil {
		return nil, err
	}
	headerLine, _ := cr.FieldPos(0)
	p.headerEnd = cr.InputOffset()
	if err := p.columns(header, headerLine); err != nil {
		return nil, err
	}

	var reqs []Request
	var ids traceIDs
	prevArrival := math.Inf(-1)
	for {
		rec, err := p.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != p.ncols {
			return nil, &LineError{File: name, Line: line,
				Msg: fmt.Sprintf("row has %d fields, the header has %d", len(rec), p.ncols)}
		}
		req, err := p.request(rec)
		if err != nil {
			return nil, err
		}
		if reqs == nil {
			// Size the result from the first row's length (a guess:
			// append grows it when the rows are shorter).
			n := 16
			if rowLen := cr.InputOffset() - p.headerEnd; size > 0 && rowLen > 0 {
				rows := (size - p.headerEnd) / rowLen
				n = int(min(rows+rows/32, 1<<24)) + 16
			}
			reqs = make([]Request, 0, n)
			ids.init(n)
		}
		if first, dup := ids.add(reqs, req.ID, line); dup {
			return nil, p.errAt(p.col[0], "duplicate id %q (first on line %d)", req.ID, first)
		}
		if req.Arrival < prevArrival {
			return nil, p.errAt(p.col[1], "%s is before the previous row's %s (the trace must be sorted by arrival)",
				traceNum(req.Arrival), traceNum(prevArrival))
		}
		prevArrival = req.Arrival
		reqs = append(reqs, req)
	}
	if len(reqs) == 0 {
		return nil, &LineError{File: name, Line: headerLine, Msg: "no requests (the file has only a header)"}
	}
	return reqs, nil
}

// traceIDs is the set of ids seen so far, for finding duplicates: an
// open-addressing hash table of indexes into the requests, which is
// several times smaller (and so faster) than a map[string]int.
type traceIDs struct {
	seed  maphash.Seed
	slots []uint64 // 0: empty; else the hash's high 32 bits << 32 | index+1
	lines []int32  // line of each request
}

func (t *traceIDs) init(n int) {
	t.seed = maphash.MakeSeed()
	size := 16
	for size < 2*n {
		size *= 2
	}
	t.slots = make([]uint64, size)
	t.lines = make([]int32, 0, n)
}

// add records id, the id of request len(reqs) (about to be appended) at
// line; when the id was seen before it returns that line and true.
func (t *traceIDs) add(reqs []Request, id string, line int) (int, bool) {
	if 2*(len(t.lines)+1) > len(t.slots) {
		t.grow(reqs)
	}
	h := maphash.String(t.seed, id)
	mask := uint64(len(t.slots) - 1)
	tag := h >> 32 << 32
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			t.slots[i] = tag | uint64(len(t.lines)+1)
			t.lines = append(t.lines, int32(min(line, math.MaxInt32)))
			return 0, false
		}
		if s>>32<<32 == tag {
			if k := int(uint32(s)) - 1; reqs[k].ID == id {
				return int(t.lines[k]), true
			}
		}
	}
}

// grow doubles the table.
func (t *traceIDs) grow(reqs []Request) {
	t.slots = make([]uint64, 2*len(t.slots))
	mask := uint64(len(t.slots) - 1)
	for k := range t.lines {
		h := maphash.String(t.seed, reqs[k].ID)
		i := h & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = h>>32<<32 | uint64(k+1)
	}
}

// traceParser holds the state of one ParseTrace.
type traceParser struct {
	name      string
	cr        *csv.Reader
	ncols     int
	headerEnd int64 // offset of the first row
	// col[i] is the index of TraceColumns[i] in a row, -1 when absent.
	col [9]int
}

// next returns the next non-blank record.
func (p *traceParser) next() ([]string, error) {
	for {
		rec, err := p.cr.Read()
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, &LineError{File: p.name, Line: pe.Line, Msg: "csv: " + pe.Err.Error()}
			}
			if err == io.EOF {
				return nil, err
			}
			return nil, fmt.Errorf("sim: read trace %s: %w", p.name, err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a line of white space
		}
		return rec, nil
	}
}

// columns reads the header row.
func (p *traceParser) columns(header []string, line int) error {
	for i := range p.col {
		p.col[i] = -1
	}
	p.ncols = len(header)
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		known := false
		for c, name := range TraceColumns {
			if h == name {
				if p.col[c] >= 0 {
					return &LineError{File: p.name, Line: line, Field: "header", Msg: fmt.Sprintf("column %q given twice", h)}
				}
				p.col[c] = i
				known = true
			}
		}
		if !known {
			return &LineError{File: p.name, Line: line, Field: "header",
				Msg: fmt.Sprintf("unknown column %q (valid: %s)", h, strings.Join(TraceColumns, ", "))}
		}
	}
	var missing []string
	for c := 0; c < traceRequired; c++ {
		if p.col[c] < 0 {
			missing = append(missing, TraceColumns[c])
		}
	}
	if len(missing) > 0 {
		return &LineError{File: p.name, Line: line, Field: "header",
			Msg: fmt.Sprintf("missing column(s) %s (required: %s)", strings.Join(missing, ", "),
				strings.Join(TraceColumns[:traceRequired], ", "))}
	}
	return nil
}

// errAt is an error about the field at index idx of the current record.
func (p *traceParser) errAt(idx int, format string, args ...any) error {
	line, _ := p.cr.FieldPos(idx)
	field := ""
	for c, i := range p.col {
		if i == idx {
			field = TraceColumns[c]
		}
	}
	return &LineError{File: p.name, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// request parses one row.
func (p *traceParser) request(rec []string) (Request, error) {
	var r Request
	var err error
	r.ID = strings.TrimSpace(rec[p.col[0]])
	if r.ID == "" {
		return r, p.errAt(p.col[0], "must not be empty")
	}
	if r.Arrival, err = p.float(rec, 1, false, false); err != nil {
		return r, err
	}
	if r.Cores, err = p.int(rec, 2, 1, false); err != nil {
		return r, err
	}
	if r.RAMGB, err = p.float(rec, 3, true, false); err != nil {
		return r, err
	}
	if r.Hold, err = p.float(rec, 4, false, false); err != nil {
		return r, err
	}
	if r.GPUs, err = p.int(rec, 5, 0, true); err != nil {
		return r, err
	}
	if r.StorageGB, err = p.float(rec, 6, false, true); err != nil {
		return r, err
	}
	if r.MaxLatencyNS, err = p.float(rec, 7, false, true); err != nil {
		return r, err
	}
	if r.MinBandwidthGbps, err = p.float(rec, 8, false, true); err != nil {
		return r, err
	}
	return r, nil
}

// float parses column c: a finite number >= 0 (> 0 when positive). An
// absent column, or an empty cell of an optional one, is 0.
func (p *traceParser) float(rec []string, c int, positive, optional bool) (float64, error) {
	idx := p.col[c]
	if idx < 0 {
		return 0, nil
	}
	s := strings.TrimSpace(rec[idx])
	if s == "" && optional {
		return 0, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	bad := err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (positive && v == 0)
	if bad {
		if positive {
			return 0, p.errAt(idx, "must be a finite number > 0, got %q", s)
		}
		return 0, p.errAt(idx, "must be a finite number >= 0, got %q", s)
	}
	return v, nil
}

// int parses column c: an integer from least to 1,000,000. An absent
// column, or an empty cell of an optional one, is 0.
func (p *traceParser) int(rec []string, c, least int, optional bool) (int, error) {
	idx := p.col[c]
	if idx < 0 {
		return 0, nil
	}
	s := strings.TrimSpace(rec[idx])
	if s == "" && optional {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < least || v > maxTraceCount {
		return 0, p.errAt(idx, "must be an integer from %d to 1,000,000, got %q", least, s)
	}
	return v, nil
}

// traceNum formats v the way WriteTrace does.
func traceNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// WriteTrace writes reqs in the format ParseTrace reads: the columns id,
// arrival, cores, ram_gb and hold, then each optional column that some
// request uses. Numbers are written exactly (shortest round-trip form).
func WriteTrace(w io.Writer, reqs []Request) error {
	var gpus, storage, latency, bandwidth bool
	for i := range reqs {
		r := &reqs[i]
		gpus = gpus || r.GPUs != 0
		storage = storage || r.StorageGB != 0
		latency = latency || r.MaxLatencyNS != 0
		bandwidth = bandwidth || r.MinBandwidthGbps != 0
	}
	header := append([]string(nil), TraceColumns[:traceRequired]...)
	for _, o := range []struct {
		used bool
		name string
	}{{gpus, colGPUs}, {storage, colStorageGB}, {latency, colMaxLatencyNS}, {bandwidth, colMinBandwidthGbps}} {
		if o.used {
			header = append(header, o.name)
		}
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("sim: write trace: %w", err)
	}
	rec := make([]string, 0, len(header))
	for i := range reqs {
		r := &reqs[i]
		rec = append(rec[:0], r.ID, traceNum(r.Arrival), strconv.Itoa(r.Cores), traceNum(r.RAMGB), traceNum(r.Hold))
		if gpus {
			rec = append(rec, strconv.Itoa(r.GPUs))
		}
		if storage {
			rec = append(rec, traceNum(r.StorageGB))
		}
		if latency {
			rec = append(rec, traceNum(r.MaxLatencyNS))
		}
		if bandwidth {
			rec = append(rec, traceNum(r.MinBandwidthGbps))
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("sim: write trace: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("sim: write trace: %w", err)
	}
	return nil
}
