package forecast

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Step is the history's resolution: one point per 10 minutes.
const Step = 10 * time.Minute

// Capacity is the most points a History keeps: 15 days, enough for two
// weeks and a day to detect and backtest a weekly period.
const Capacity = 15 * 24 * int(time.Hour/Step)

// headerBytes is the encoded size of a History without its points.
const headerBytes = 1 + 8 + 8 + 8 + 4 + 2

// MaxBytes bounds the encoding of one History (one metric of one target):
// 4,351 bytes.
const MaxBytes = headerBytes + 2*Capacity

// missing marks a point without samples.
const missing = math.MaxUint16

// top is the largest quantum: a point q stands for q/top × Scale.
const top = math.MaxUint16 - 1

// History is a compact, downsampled history of one metric's demand (in
// replicas needed at the target, see Demand): the mean of each Step,
// quantized to 16 bits against Scale, for the last Capacity steps, and the
// step still open. Its zero value is empty and ready to use. It is a value
// the caller keeps (and a store persists, MarshalBinary); it is not safe
// for concurrent use.
type History struct {
	// Start is the start of the step of Points[0].
	Start time.Time
	// Scale is the value of the largest quantum; it grows (and the points
	// are requantized) when a larger value is added.
	Scale float64
	// Points are the closed steps' means, oldest first; math.MaxUint16
	// where a step had no sample.
	Points []uint16
	// OpenSum and OpenCount accumulate the samples of the open step, the
	// one after the last point.
	OpenSum   float64
	OpenCount uint32
}

// Add records value v (negative values count as 0) sampled at `at`.
// Samples older than the open step are dropped; a gap closes the steps it
// skips as missing.
func (h *History) Add(at time.Time, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	v = max(v, 0)
	if h.Start.IsZero() {
		h.Start = at.Truncate(Step)
	}
	i := int(at.Sub(h.Start) / Step)
	open := len(h.Points)
	switch {
	case at.Before(h.Start) || i < open:
		return
	case i > open:
		h.closeOpen()
		gap := i - open - 1
		if gap >= Capacity {
			*h = History{Start: at.Truncate(Step), Scale: h.Scale}
		} else {
			for range gap {
				h.Points = append(h.Points, missing)
			}
		}
		h.trim()
	}
	if v > h.Scale {
		h.rescale(v * 1.25)
	}
	h.OpenSum += v
	h.OpenCount++
}

// Until returns h as it stood at t: the steps that closed by t, without
// the open step (its samples are not kept apart by time). A history that
// began after t is empty.
func (h *History) Until(t time.Time) History {
	if h.Start.IsZero() || !t.After(h.Start) {
		return History{Scale: h.Scale}
	}
	n := min(int(t.Sub(h.Start)/Step), len(h.Points))
	return History{Start: h.Start, Scale: h.Scale, Points: slices.Clone(h.Points[:n])}
}

// closeOpen appends the open step as a point.
func (h *History) closeOpen() {
	q := uint16(missing)
	if h.OpenCount > 0 {
		q = h.quantize(h.OpenSum / float64(h.OpenCount))
	}
	h.Points = append(h.Points, q)
	h.OpenSum, h.OpenCount = 0, 0
}

// trim drops the oldest points beyond Capacity.
func (h *History) trim() {
	if n := len(h.Points) - Capacity; n > 0 {
		h.Points = append(h.Points[:0], h.Points[n:]...)
		h.Start = h.Start.Add(time.Duration(n) * Step)
	}
}

func (h *History) quantize(v float64) uint16 {
	if h.Scale <= 0 {
		return 0
	}
	return uint16(min(math.Round(v/h.Scale*top), top))
}

// rescale requantizes the points against scale.
func (h *History) rescale(scale float64) {
	old := h.Scale
	h.Scale = scale
	for i, q := range h.Points {
		if q != missing && old > 0 {
			h.Points[i] = h.quantize(float64(q) / top * old)
		}
	}
}

// Values returns the closed steps' means, oldest first, NaN where a step
// had no sample.
func (h *History) Values() []float64 {
	out := make([]float64, len(h.Points))
	for i, q := range h.Points {
		if q == missing {
			out[i] = math.NaN()
		} else {
			out[i] = float64(q) / top * h.Scale
		}
	}
	return out
}

// End returns the start of the open step: the end of the last point.
func (h *History) End() time.Time { return h.Start.Add(time.Duration(len(h.Points)) * Step) }

// encodingVersion is the first byte of an encoded History.
const encodingVersion = 1

// MarshalBinary encodes h in at most MaxBytes bytes: a version byte, Start
// (Unix seconds), Scale, OpenSum, OpenCount, the number of points and the
// points, big-endian.
func (h *History) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, headerBytes+2*len(h.Points))
	b = append(b, encodingVersion)
	var start int64 // 0 for the zero time
	if !h.Start.IsZero() {
		start = h.Start.Unix()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(h.Scale))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(h.OpenSum))
	b = binary.BigEndian.AppendUint32(b, h.OpenCount)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.Points)))
	for _, q := range h.Points {
		b = binary.BigEndian.AppendUint16(b, q)
	}
	return b, nil
}

// ErrEncoding is matched (errors.Is) by the errors of UnmarshalBinary.
var ErrEncoding = errors.New("forecast: invalid history encoding")

// UnmarshalBinary decodes what MarshalBinary encoded.
func (h *History) UnmarshalBinary(b []byte) error {
	if len(b) < headerBytes || b[0] != encodingVersion {
		return fmt.Errorf("%w: %d bytes", ErrEncoding, len(b))
	}
	n := int(binary.BigEndian.Uint16(b[29:]))
	if n > Capacity || len(b) != headerBytes+2*n {
		return fmt.Errorf("%w: %d points in %d bytes", ErrEncoding, n, len(b))
	}
	scale := math.Float64frombits(binary.BigEndian.Uint64(b[9:]))
	sum := math.Float64frombits(binary.BigEndian.Uint64(b[17:]))
	if math.IsNaN(scale) || scale < 0 || math.IsNaN(sum) || sum < 0 {
		return fmt.Errorf("%w: scale %v, sum %v", ErrEncoding, scale, sum)
	}
	*h = History{
		Scale:     scale,
		OpenSum:   sum,
		OpenCount: binary.BigEndian.Uint32(b[25:]),
		Points:    make([]uint16, n),
	}
	if s := int64(binary.BigEndian.Uint64(b[1:])); s != 0 {
		h.Start = time.Unix(s, 0).UTC()
	}
	for i := range h.Points {
		h.Points[i] = binary.BigEndian.Uint16(b[headerBytes+2*i:])
	}
	return nil
}
