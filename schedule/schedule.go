// Package schedule turns scheduled capacity windows into proposals for
// the engine: while a window is active it proposes its minimum replica
// count, which the engine merges by max with the metrics' proposal (a
// floor, not a pinned count), so the metrics can still scale above it and
// stabilization, policies and min/max still apply.
//
// A window has an IANA time zone, a start given as a five-field cron
// expression (minute hour day-of-month month day-of-week, or a descriptor
// such as @daily), and either an end (another cron expression) or a
// duration. Cron expressions are read on the window's wall clock:
//
//	schedule.Window{Name: "business-hours", TimeZone: "Europe/Berlin",
//		Start: "0 8 * * 1-5", End: "0 18 * * 1-5", MinReplicas: 10}
//
// # Daylight saving time
//
// Starts and ends are wall-clock times; a Duration is elapsed time.
//   - A start or end whose wall time is skipped when the clocks go forward
//     happens at the jump (a 02:30 start on the night Berlin jumps from
//     02:00 to 03:00 opens the window at 03:00 CEST), rather than not at
//     all as plain cron would have it.
//   - A start or end whose wall time happens twice when the clocks go back
//     happens at its first occurrence only: a window does not reopen, nor
//     close twice, in the repeated hour.
//   - A duration counts real time: 8h from 22:00 on a night the clocks go
//     back ends at 05:00 local (8 elapsed hours), not 06:00.
//
// # Cost
//
// Active looks back for the latest start at most Lookback (or the window's
// duration, when longer), stepping out from a minute to a day, so a
// decision costs a few cron evaluations per window whatever the cron.
//
// The package is pure: every function takes the time as a parameter.
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	_ "time/tzdata" // zones are read from the binary: the server's image has no zoneinfo

	"github.com/robfig/cron/v3"

	"github.com/setpointhq/setpoint/engine"
)

// MaxWindows is the most windows a target may have.
const MaxWindows = 32

// maxText bounds a window's name, time zone and cron expressions, in
// bytes.
const maxText = 128

// Lookback is how far before now the latest start of a window with an End
// is looked for: a window opened earlier than that is taken as closed.
const Lookback = 8 * 24 * time.Hour

// ErrInvalid is matched (errors.Is) by every error Compile returns.
var ErrInvalid = errors.New("schedule: invalid window")

// Window is one scheduled capacity window.
type Window struct {
	// Name identifies the window in explanations.
	Name string
	// TimeZone is the IANA zone its cron expressions are read in, e.g.
	// "America/New_York"; "UTC" when empty.
	TimeZone string
	// Start is the cron expression of the window's starts.
	Start string
	// End is the cron expression of its ends; exclusive with Duration.
	End string
	// Duration is how long the window stays open after each start;
	// exclusive with End.
	Duration time.Duration
	// MinReplicas is the replica count proposed while the window is open.
	MinReplicas int32
}

// FieldError says which window field is invalid and why. It matches
// ErrInvalid.
type FieldError struct {
	// Field is the path of the field, e.g. "schedules[1].start".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return "schedule: invalid " + e.Field + ": " + e.Reason }

// Is makes every FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Schedule is a target's compiled windows; safe for concurrent use.
type Schedule struct {
	windows []compiled
}

type compiled struct {
	Window
	loc        *time.Location
	start, end *wallCron // end nil when the window has a duration
}

// parser reads five-field cron expressions and descriptors.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Compile checks ws and compiles them. Errors are *FieldError naming the
// field as "schedules[i].<field>".
func Compile(ws []Window) (*Schedule, error) {
	if len(ws) > MaxWindows {
		return nil, &FieldError{Field: "schedules", Reason: fmt.Sprintf("at most %d windows, got %d", MaxWindows, len(ws))}
	}
	s := &Schedule{windows: make([]compiled, 0, len(ws))}
	for i, w := range ws {
		f := "schedules[" + strconv.Itoa(i) + "]"
		c := compiled{Window: w}
		for _, t := range []struct{ name, v string }{{"name", w.Name}, {"timeZone", w.TimeZone}, {"start", w.Start}, {"end", w.End}} {
			if len(t.v) > maxText {
				return nil, &FieldError{Field: f + "." + t.name, Reason: fmt.Sprintf("at most %d bytes, got %d", maxText, len(t.v))}
			}
		}
		if w.Name == "" {
			return nil, &FieldError{Field: f + ".name", Reason: "must be set"}
		}
		for j := range i {
			if ws[j].Name == w.Name {
				return nil, &FieldError{Field: f + ".name", Reason: fmt.Sprintf("duplicate of schedules[%d]", j)}
			}
		}
		tz := w.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		loc, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return nil, &FieldError{Field: f + ".timeZone", Reason: fmt.Sprintf("not an IANA time zone: %q", w.TimeZone)}
		}
		c.loc = loc
		if c.start, err = compileCron(w.Start, loc); err != nil {
			return nil, &FieldError{Field: f + ".start", Reason: err.Error()}
		}
		switch {
		case w.End != "" && w.Duration != 0:
			return nil, &FieldError{Field: f + ".duration", Reason: "end and duration are exclusive"}
		case w.End != "":
			if c.end, err = compileCron(w.End, loc); err != nil {
				return nil, &FieldError{Field: f + ".end", Reason: err.Error()}
			}
			if w.End == w.Start {
				return nil, &FieldError{Field: f + ".end", Reason: "must differ from start"}
			}
		case w.Duration <= 0:
			return nil, &FieldError{Field: f + ".duration", Reason: fmt.Sprintf("an end or a duration > 0 is required, got %s", w.Duration)}
		case w.Duration > Lookback:
			return nil, &FieldError{Field: f + ".duration", Reason: fmt.Sprintf("at most %s, got %s", Lookback, w.Duration)}
		}
		if w.MinReplicas < 0 {
			return nil, &FieldError{Field: f + ".minReplicas", Reason: fmt.Sprintf("must be >= 0, got %d", w.MinReplicas)}
		}
		s.windows = append(s.windows, c)
	}
	return s, nil
}

// Active is one open window.
type Active struct {
	// Window is the window.
	Window Window
	// Since is the start of the current opening.
	Since time.Time
	// Until is when it closes, zero when no end is found within Lookback.
	Until time.Time
	// Location is the window's time zone.
	Location *time.Location
}

// Active returns the windows open at now, in the order given to Compile.
func (s *Schedule) Active(now time.Time) []Active {
	var out []Active
	for i := range s.windows {
		w := &s.windows[i]
		lookback := Lookback
		if w.end == nil {
			lookback = w.Duration
		}
		since, ok := w.start.latest(now, lookback)
		if !ok {
			continue
		}
		var until time.Time
		if w.end == nil {
			until = since.Add(w.Duration)
		} else {
			until = w.end.next(since)
		}
		if !until.IsZero() && !until.After(now) {
			continue
		}
		out = append(out, Active{Window: w.Window, Since: since, Until: until, Location: w.loc})
	}
	return out
}

// Proposals returns the engine proposals of the windows open at now: one
// per window, its MinReplicas, named "schedule <name>".
func (s *Schedule) Proposals(now time.Time) []engine.Proposal {
	var out []engine.Proposal
	for _, a := range s.Active(now) {
		loc := a.Location
		until := "no end found"
		if !a.Until.IsZero() {
			until = "until " + a.Until.In(loc).Format("2006-01-02 15:04 MST")
		}
		out = append(out, engine.Proposal{
			Name:     "schedule " + a.Window.Name,
			Kind:     engine.ProposalSchedule,
			Replicas: a.Window.MinReplicas,
			Explanation: fmt.Sprintf("window open since %s, %s (%s): at least %d replicas",
				a.Since.In(loc).Format("2006-01-02 15:04 MST"), until, loc, a.Window.MinReplicas),
		})
	}
	return out
}
