package twin

import (
	"fmt"
	"math"
	"time"
)

// Point is one corner of a Trace: the demand at a moment, counted from the
// start of the load.
type Point struct {
	At     time.Duration
	Demand float64 // work per second, in the units of the workload's metric (CPU: millicores)
}

// Trace is a demand over time: straight lines between its points, the
// first point's demand before it and the last point's after it.
type Trace struct {
	// Name says what the trace is, for test names and logs.
	Name string
	// Points are in increasing order of At.
	Points []Point
}

// At returns the demand d after the start of the load.
func (tr Trace) At(d time.Duration) float64 {
	p := tr.Points
	if len(p) == 0 {
		return 0
	}
	if d <= p[0].At {
		return p[0].Demand
	}
	for i := 1; i < len(p); i++ {
		if d < p[i].At {
			f := float64(d-p[i-1].At) / float64(p[i].At-p[i-1].At)
			return p[i-1].Demand + f*(p[i].Demand-p[i-1].Demand)
		}
	}
	return p[len(p)-1].Demand
}

// Duration returns the moment of the last point: after it the demand stays.
func (tr Trace) Duration() time.Duration {
	if len(tr.Points) == 0 {
		return 0
	}
	return tr.Points[len(tr.Points)-1].At
}

// Scaled returns the trace with every moment multiplied by f: the same
// shape, slower (f > 1) or faster.
func (tr Trace) Scaled(f float64) Trace {
	out := Trace{Name: tr.Name, Points: make([]Point, len(tr.Points))}
	for i, p := range tr.Points {
		out.Points[i] = Point{At: time.Duration(float64(p.At) * f), Demand: p.Demand}
	}
	return out
}

// Steady is a constant demand for d.
func Steady(demand float64, d time.Duration) Trace {
	return Trace{Name: "steady", Points: []Point{{0, demand}, {d, demand}}}
}

// Ramp holds from for hold, rises linearly to to over rise, holds to for
// hold, and falls back to from at once (the scale-down half).
func Ramp(from, to float64, hold, rise time.Duration) Trace {
	return Trace{Name: "ramp", Points: []Point{
		{0, from}, {hold, from}, {hold + rise, to}, {2*hold + rise, to},
		{2*hold + rise + time.Millisecond, from}, {3*hold + rise, from},
	}}
}

// Spike holds base, jumps to peak at at for width, and falls back.
func Spike(base, peak float64, at, width, tail time.Duration) Trace {
	return Trace{Name: "spike", Points: []Point{
		{0, base}, {at, base}, {at + time.Millisecond, peak},
		{at + width, peak}, {at + width + time.Millisecond, base}, {at + width + tail, base},
	}}
}

// Diurnal is a day compressed into period: demand from low (night) to high
// (midday) and back as a sine, sampled every period/24 ("hours").
func Diurnal(low, high float64, period time.Duration) Trace {
	tr := Trace{Name: "diurnal"}
	for h := 0; h <= 24; h++ {
		phase := 2 * math.Pi * float64(h) / 24
		demand := low + (high-low)*(1-math.Cos(phase))/2
		tr.Points = append(tr.Points, Point{At: period * time.Duration(h) / 24, Demand: demand})
	}
	return tr
}

// Flapping alternates between low and high every half period, n times:
// load that a naive autoscaler would follow up and down.
func Flapping(low, high float64, period time.Duration, n int) Trace {
	tr := Trace{Name: "flapping"}
	half := period / 2
	for i := range n {
		at := time.Duration(i) * period
		tr.Points = append(tr.Points,
			Point{at, low}, Point{at + half - time.Millisecond, low},
			Point{at + half, high}, Point{at + period - time.Millisecond, high})
	}
	tr.Points = append(tr.Points, Point{time.Duration(n) * period, low})
	return tr
}

// String returns the trace's name and length.
func (tr Trace) String() string {
	return fmt.Sprintf("%s (%v)", tr.Name, tr.Duration())
}
