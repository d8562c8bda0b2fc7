package provision

import (
	"errors"
	"fmt"
	"math"
)

// Sizer is the consumer's side of P0 §8's GetMemory(pred): one consumer
// sizes its own pooled memory from its own samples with the same policy
// and rules as the loop in serve (`rackpool cache --remote-memory auto`).
// Demand and sizes are in bytes; decisions are in granules. Not safe for
// concurrent use.
type Sizer struct {
	dec     *Decider
	granule float64
	lo, hi  float64 // bounds in granules
	hist    []float64
	held    int
	level   float64
	maxHist int
}

// NewSizer starts at initial bytes, between minBytes and maxBytes, in
// granules of granuleBytes.
func NewSizer(policy Policy, rules Rules, granuleBytes, minBytes, maxBytes, initial int64) (*Sizer, error) {
	if granuleBytes <= 0 || minBytes <= 0 || maxBytes < minBytes {
		return nil, errors.New("provision: sizer needs a positive granule and 0 < min <= max")
	}
	rules.Granule = 1
	dec, err := NewDecider(policy, rules)
	if err != nil {
		return nil, err
	}
	g := float64(granuleBytes)
	s := &Sizer{dec: dec, granule: g, lo: math.Ceil(float64(minBytes) / g), hi: math.Floor(float64(maxBytes) / g),
		maxHist: dec.Rules().Window}
	if s.hi < s.lo {
		return nil, fmt.Errorf("provision: no whole granule of %d bytes between %d and %d", granuleBytes, minBytes, maxBytes)
	}
	s.level = math.Min(math.Max(math.Ceil(float64(initial)/g), s.lo), s.hi)
	return s, nil
}

// Size is the current size in bytes.
func (s *Sizer) Size() int64 { return int64(s.level * s.granule) }

// Step records one demand sample and decides the next size: the decision
// (in granules, explained) and the size in bytes, within the bounds. Call
// Applied once the size is in force (or not at all if it could not be).
func (s *Sizer) Step(demandBytes int64) (Decision, int64) {
	s.hist = append(s.hist, float64(max(demandBytes, 0))/s.granule)
	if len(s.hist) > 2*s.maxHist {
		s.hist = append(s.hist[:0], s.hist[len(s.hist)-s.maxHist:]...)
	}
	d, err := s.dec.Decide(s.level, s.held, s.hist)
	if err != nil { // only on an empty history, which Step never has
		return Decision{Action: Hold, From: s.level, To: s.level, Reason: err.Error()}, s.Size()
	}
	to := math.Min(math.Max(d.To, s.lo), s.hi)
	d.To = to
	switch {
	case to > s.level:
		d.Action = Grow
	case to < s.level:
		d.Action = Shrink
	default:
		d.Action = Hold
		s.held++
	}
	return d, int64(to * s.granule)
}

// Applied records that size bytes are now in force.
func (s *Sizer) Applied(size int64) {
	lv := math.Ceil(float64(size) / s.granule)
	if lv != s.level {
		s.level, s.held = lv, 0
	}
}
