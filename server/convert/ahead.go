package convert

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/forecast"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/schedule"
	"github.com/setpointhq/setpoint/target"
)

// This file converts the spec's opt-in fields that act ahead of the load
// (docs/ahead-of-load.md): spec.fallback into a target.Fallback and
// spec.schedules into a compiled schedule.Schedule, and spec.forecast (with
// the request's pod_startup) into a forecast.Config. Each is absent in a
// spec that does not set it, and then nothing of the decision changes.

// Ahead is what a spec's fallback and schedules resolve into.
type Ahead struct {
	// Fallback is spec.fallback, nil when absent.
	Fallback *target.Fallback
	// Schedule is spec.schedules compiled, nil when there are none.
	Schedule *schedule.Schedule
}

// Proposals returns the proposals of a's schedule windows open at now (nil
// without a schedule). The fallback's proposal is target.Decide's, which
// knows since when the metrics have been failing.
func (a Ahead) Proposals(now time.Time) []engine.Proposal {
	if a.Schedule == nil {
		return nil
	}
	return a.Schedule.Proposals(now)
}

// AheadOf converts and validates the fallback and schedules of spec (prefix
// is the spec's field path in the request, e.g. "spec"). Errors are
// *setpointv1.ValidationError naming the field. Input makes the same
// checks, so a spec Input accepted converts without error.
func AheadOf(prefix string, spec *setpointv1.HorizontalPodAutoscalerSpec) (Ahead, error) {
	c := &converter{err: &setpointv1.ValidationError{}}
	a := c.ahead(prefix, spec)
	return a, c.err.Err()
}

// schedules keeps the schedules compiled from specs' windows: a caller
// sends its windows with every Recommend, and compiling three loads their
// zones and parses their cron expressions (141 allocations, about 50 µs),
// where a cached schedule costs a lookup (docs/ahead-of-load.md). Bounded
// at 4,096 schedules and 16 MiB of their estimated memory, the least
// recently used dropped first; a schedule is immutable, so targets with
// the same windows share one.
var schedules = schedule.NewCache(4096, 16<<20)

// fallbackBehaviors are the API's spellings of target's behaviors.
var fallbackBehaviors = map[string]target.FallbackBehavior{
	"":                        target.FallbackStatic,
	"static":                  target.FallbackStatic,
	"currentReplicas":         target.FallbackCurrentReplicas,
	"currentReplicasIfHigher": target.FallbackCurrentReplicasIfHigher,
	"currentReplicasIfLower":  target.FallbackCurrentReplicasIfLower,
}

// ahead converts spec's fallback and schedules, recording violations under
// prefix.
func (c *converter) ahead(prefix string, s *setpointv1.HorizontalPodAutoscalerSpec) Ahead {
	var a Ahead
	if s == nil {
		return a
	}
	maxReplicas := s.GetMaxReplicas()
	if f := s.GetFallback(); f != nil {
		p := prefix + ".fallback"
		out := &target.Fallback{Replicas: f.GetReplicas()}
		c.duration(p+".failure_duration", f.GetFailureDuration(), &out.After)
		b, ok := fallbackBehaviors[f.GetBehavior()]
		if !ok {
			c.err.Add(p+".behavior", "must be static, currentReplicas, currentReplicasIfHigher or currentReplicasIfLower, got %q", f.GetBehavior())
		}
		out.Behavior = b
		c.replicas(p+".replicas", f.GetReplicas(), maxReplicas)
		a.Fallback = out
	}
	if f := s.GetForecast(); f != nil {
		p := prefix + ".forecast"
		if d := f.GetLeadTime(); d != nil {
			if err := d.CheckValid(); err != nil || d.AsDuration() <= 0 || d.AsDuration() >= forecast.Day {
				c.err.Add(p+".lead_time", "must be a duration > 0 and below 24h, got %v", d.AsDuration())
			}
		}
		if e := f.GetMaxError(); !(e >= 0 && e <= 1) {
			c.err.Add(p+".max_error", "must be a fraction in (0, 1], or 0 for the default, got %v", e)
		}
	}
	ws := s.GetSchedules()
	if len(ws) == 0 {
		return a
	}
	windows := make([]schedule.Window, len(ws))
	valid := true
	for i, w := range ws {
		p := prefix + ".schedules[" + strconv.Itoa(i) + "]"
		windows[i] = schedule.Window{Name: w.GetName(), TimeZone: w.GetTimeZone(), Start: w.GetStart(), End: w.GetEnd(), MinReplicas: w.GetMinReplicas()}
		if d := w.GetDuration(); d != nil {
			if err := d.CheckValid(); err != nil || d.AsDuration() <= 0 {
				c.err.Add(p+".duration", "must be a duration > 0, got %v", d.AsDuration())
				valid = false
				continue
			}
			windows[i].Duration = d.AsDuration()
		}
		if !c.replicas(p+".min_replicas", w.GetMinReplicas(), maxReplicas) {
			valid = false
		}
	}
	if !valid {
		return a
	}
	sched, err := schedules.Compile(windows)
	if err != nil {
		var fe *schedule.FieldError
		if errors.As(err, &fe) {
			c.err.Add(prefix+"."+scheduleField(fe.Field), "%s", fe.Reason)
		} else {
			c.err.Add(prefix+".schedules", "%v", err)
		}
		return a
	}
	a.Schedule = sched
	return a
}

// replicas checks that n is within [0, maxReplicas] (maxReplicas < 1 is
// spec.max_replicas' own violation), and says whether it is.
func (c *converter) replicas(field string, n, maxReplicas int32) bool {
	switch {
	case n < 0:
		c.err.Add(field, "must be >= 0, got %d", n)
	case maxReplicas >= 1 && n > maxReplicas:
		c.err.Add(field, "must be <= spec.max_replicas (%d), got %d", maxReplicas, n)
	default:
		return true
	}
	return false
}

// scheduleFields are package schedule's field names that the API spells
// otherwise.
var scheduleFields = strings.NewReplacer(".timeZone", ".time_zone", ".minReplicas", ".min_replicas")

// scheduleField returns the API's path of a schedule.FieldError's field
// ("schedules[1].timeZone" → "schedules[1].time_zone").
func scheduleField(f string) string { return scheduleFields.Replace(f) }

// Fallback returns spec.fallback as target.Input.Fallback, nil when absent
// or invalid: for a spec Input accepted (Input reports its violations).
func Fallback(spec *setpointv1.HorizontalPodAutoscalerSpec) *target.Fallback {
	if spec.GetFallback() == nil {
		return nil
	}
	c := &converter{err: &setpointv1.ValidationError{}}
	a := c.ahead("spec", &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: spec.GetMaxReplicas(), Fallback: spec.GetFallback()})
	if c.err.Err() != nil {
		return nil
	}
	return a.Fallback
}

// forecastSyncPeriod is the sync period added to a measured pod start-up
// to make a forecast's lead time: the controller's default (the server
// does not know the caller's).
const forecastSyncPeriod = 15 * time.Second

// Forecast returns the forecast settings of a request Input accepted: nil
// when its spec has no forecast (or is invalid). The lead time is
// pod_startup plus a sync period (15 s) when the request carries it, else
// spec.forecast.lead_time (0 when absent: the forecast keeps its history
// but proposes nothing).
func Forecast(req *setpointv1.RecommendRequest) *forecast.Config {
	f := req.GetSpec().GetForecast()
	if f == nil {
		return nil
	}
	c := &converter{err: &setpointv1.ValidationError{}}
	c.ahead("spec", &setpointv1.HorizontalPodAutoscalerSpec{Forecast: f})
	startup, ok := c.podStartup(req.GetPodStartup())
	if c.err.Err() != nil {
		return nil
	}
	cfg := &forecast.Config{Lead: f.GetLeadTime().AsDuration(), MaxError: f.GetMaxError()}
	if ok {
		cfg.Lead = startup + forecastSyncPeriod
	}
	return cfg
}

// podStartup checks the request's pod_startup (>= 0, below 24h) and
// returns it, false when absent or invalid.
func (c *converter) podStartup(d *durationpb.Duration) (time.Duration, bool) {
	if d == nil {
		return 0, false
	}
	if err := d.CheckValid(); err != nil || d.AsDuration() < 0 || d.AsDuration() >= forecast.Day {
		c.err.Add("pod_startup", "must be a duration >= 0 and below 24h, got %v", d.AsDuration())
		return 0, false
	}
	return d.AsDuration(), true
}
