package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/schedule"
)

// syncPeriod is the controller's sync period: one decision per 15 s.
const syncPeriod = 15 * time.Second

// day is a day in sync periods.
const day = int(24 * time.Hour / syncPeriod)

// epoch is the start of every trace: a Monday, midnight UTC.
var epoch = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// interval is a stretch of a trace, from its start.
type interval struct{ from, to time.Duration }

// Trace is a demand trace: the cpu cores the workload needs, one value per
// sync period, generated from a fixed seed.
type Trace struct {
	// Name identifies the trace.
	Name string
	// Periodic says which acceptance bar applies: forecasts must help
	// (periodic) or stay out of the way (aperiodic).
	Periodic bool
	// Warmup is how many leading days are run but not measured: a
	// forecast's history fills during them.
	Warmup int
	// Demand is the demand in cores at each sync.
	Demand []float64
	// Outages are when the metrics API fails (the fallback case).
	Outages []interval
	// Windows are schedule windows that cover the trace's known peaks
	// (the schedule case).
	Windows []schedule.Window
	// Initial is the demand the workload is sized for when the trace
	// starts, in cores; 0 means the first value's.
	Initial float64
}

// hourOf is the hour of day of sync i, fractional.
func hourOf(i int) float64 { return float64(i%day) * syncPeriod.Hours() }

// ramp rises smoothly from 0 at hour from to 1 at hour to.
func ramp(h, from, to float64) float64 { return smoothstep(min(max((h-from)/(to-from), 0), 1)) }

// dailyShape is a day of a consumer web service: quiet at night, a rise
// in 15 minutes at 06:55, a lunch peak that comes in 10 minutes at 11:55,
// the daily push notification at 19:00 that nearly doubles the load in 3
// minutes and fades over an hour and a half, a decline 21:00–23:00;
// between 0 and 1.8. Its ramps are steep against a 5-minute
// start-up on purpose: the issue measured, from outside, about 40% of
// the reactive HPA's under-provisioning beyond the tolerance band and
// about an hour a day of overload over the periodic traces, and these
// traces were set to show that to the references (docs/benchmarks.md)
// before any forecast ran on them.
func dailyShape(i int) float64 {
	h := hourOf(i)
	return ramp(h, hm(6, 55), hm(7, 10)) - ramp(h, 21, 23) +
		0.4*(ramp(h, hm(11, 55), hm(12, 5))-ramp(h, hm(12, 45), hm(13, 30))) +
		0.8*ramp(h, 19, hm(19, 3))*math.Exp(-max(h-hm(19, 3), 0)/0.75)
}

// hm is h hours and m minutes, in hours.
func hm(h, m float64) float64 { return h + m/60 }

// bump is a bell of height 1 centred on hour c, of width w hours.
func bump(h, c, w float64) float64 { return math.Exp(-(h - c) * (h - c) / (2 * w * w)) }

// businessShape is an office day: a steep ramp 08:00–08:20, a lunch dip,
// down 17:00–19:00.
func businessShape(i int) float64 {
	h := hourOf(i)
	return ramp(h, 8, hm(8, 20)) - ramp(h, 17, 19) - 0.2*bump(h, 12.5, 0.5)*ramp(h, 8, hm(8, 20))
}

func smoothstep(x float64) float64 { return x * x * (3 - 2*x) }

// weekend reports whether sync i falls on a Saturday or Sunday (the
// traces start on a Monday).
func weekend(i int) bool { return (i/day)%7 >= 5 }

// arNoise is a slowly correlated noise (AR(1), a time constant of about
// a minute) with standard deviation sd.
type arNoise struct {
	r  *rand.Rand
	v  float64
	sd float64
}

func (n *arNoise) next() float64 {
	const a = 0.78 // e^(-15s/60s)
	n.v = a*n.v + math.Sqrt(1-a*a)*n.sd*n.r.NormFloat64()
	return n.v
}

func gen(days int, f func(i int) float64) []float64 {
	d := make([]float64, days*day)
	for i := range d {
		d[i] = max(f(i), 0.05)
	}
	return d
}

// traces returns the generated suite. days is the number of measured days
// (the weekly trace measures at least a week).
func traces(days int) []Trace {
	const warm = 2 // days of history for a daily period
	n := warm + days
	r := func(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5e7)) }
	noise := arNoise{r: r(3), sd: 0.12}
	walk := 1.6
	walkR := r(5)
	spikeR := r(7)
	var spikeLeft int
	var spikeHeight float64
	flashAt := (warm*day + day/2 + int(r(11).Int64N(int64(days*day/2)))) // somewhere in the first half
	weekDays := max(days, 7)
	weekWarm := 14
	out := []Trace{
		{Name: "daily", Periodic: true, Warmup: warm, Demand: gen(n, func(i int) float64 { return 1.5 + 14*dailyShape(i) })},
		{Name: "weekly", Periodic: true, Warmup: weekWarm, Demand: gen(weekWarm+weekDays, func(i int) float64 {
			if weekend(i) {
				return 1.5 + 5*dailyShape(i)
			}
			return 1.5 + 14*dailyShape(i)
		})},
		{Name: "daily+noise", Periodic: true, Warmup: warm, Demand: gen(n, func(i int) float64 {
			return (1.5 + 14*dailyShape(i)) * (1 + noise.next())
		})},
		{Name: "trend", Periodic: true, Warmup: warm, Demand: gen(n, func(i int) float64 {
			return (1.5 + 14*dailyShape(i)) * (1 + 0.04*float64(i)/float64(day))
		})},
		{Name: "morning-ramp", Periodic: true, Warmup: warm, Demand: gen(n, func(i int) float64 { return 1 + 14*businessShape(i) }),
			Windows: []schedule.Window{{Name: "business-hours", TimeZone: "UTC", Start: "45 7 * * *", End: "0 17 * * *", MinReplicas: 26}}},
		{Name: "random-walk", Warmup: warm, Demand: gen(n, func(i int) float64 {
			walk = min(max(walk+0.004*walkR.NormFloat64(), 0.3), 3.2)
			return math.Exp(walk)
		})},
		{Name: "spikes", Warmup: warm, Demand: gen(n, func(i int) float64 {
			if spikeLeft == 0 && spikeR.Float64() < 6.0/float64(day) { // six a day
				spikeLeft = 20 + spikeR.IntN(60) // 5–20 minutes
				spikeHeight = 4 + 8*spikeR.Float64()
			}
			v := 4.0
			if spikeLeft > 0 {
				spikeLeft--
				v += spikeHeight
			}
			return v
		})},
		{Name: "flash-crowd", Warmup: warm, Demand: gen(n, func(i int) float64 {
			v := 3.0
			if i >= flashAt {
				dt := float64(i-flashAt) * syncPeriod.Minutes()
				v += 22 * math.Min(dt/2, 1) * math.Exp(-dt/120)
			}
			return v
		})},
	}
	return out
}

// outageTrace is the daily trace with the metrics API down for 45
// minutes during each morning rise and before each evening peak.
func outageTrace(days int) Trace {
	t := traces(days)[0]
	t.Name = "daily+outages"
	for d := range t.Warmup + days {
		base := time.Duration(d) * 24 * time.Hour
		t.Outages = append(t.Outages,
			interval{base + 6*time.Hour + 45*time.Minute, base + 7*time.Hour + 30*time.Minute},
			interval{base + 18*time.Hour, base + 18*time.Hour + 45*time.Minute})
	}
	return t
}

// azureLLM is one hour of the Azure LLM inference trace 2023 (CC-BY 4.0;
// see testdata/README.md): tokens per 15 s.
//
//go:embed testdata/azure-llm-conv-2023.csv
var azureLLM []byte

// azureTrace is the real trace, scaled to a mean demand of 10 cores.
func azureTrace() (Trace, error) {
	var v []float64
	sc := bufio.NewScanner(bytes.NewReader(azureLLM))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || line == "tokens" {
			continue
		}
		n, err := strconv.ParseFloat(line, 64)
		if err != nil {
			return Trace{}, fmt.Errorf("azure-llm-conv-2023.csv: %w", err)
		}
		v = append(v, n)
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	if len(v) == 0 || sum == 0 {
		return Trace{}, fmt.Errorf("azure-llm-conv-2023.csv: no data")
	}
	for i := range v {
		v[i] = max(v[i]/(sum/float64(len(v)))*10, 0.05)
	}
	// The capture starts with a few quiet intervals (its first requests)
	// while the service was running: start it sized for the mean.
	return Trace{Name: "azure-llm-2023 (real, 1 h)", Demand: v, Initial: 10}, nil
}
