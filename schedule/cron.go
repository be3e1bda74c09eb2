package schedule

import (
	"errors"
	"time"

	"github.com/robfig/cron/v3"
)

// wallCron is a cron expression read on a zone's wall clock, with the
// package's daylight-saving rules: a skipped wall time happens at the jump,
// a repeated one at its first occurrence.
type wallCron struct {
	spec cron.SpecSchedule
	loc  *time.Location
}

func compileCron(expr string, loc *time.Location) (*wallCron, error) {
	if expr == "" {
		return nil, errors.New("must be set")
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, err
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, errors.New("must be a cron expression or @yearly, @monthly, @weekly, @daily or @hourly, not @every")
	}
	c := &wallCron{spec: *spec, loc: loc}
	c.spec.Location = loc
	return c, nil
}

// maxSteps bounds the occurrences latest walks through.
const maxSteps = 20000

// latest returns the last occurrence in (now-lookback, now], and false
// when there is none. It widens its search from a minute to lookback, so
// that it walks through few occurrences whatever the expression.
func (c *wallCron) latest(now time.Time, lookback time.Duration) (time.Time, bool) {
	for _, l := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, lookback} {
		if l > lookback {
			l = lookback
		}
		s := c.next(now.Add(-l))
		if s.IsZero() || s.After(now) {
			if l == lookback {
				return time.Time{}, false
			}
			continue
		}
		for range maxSteps {
			n := c.next(s)
			if n.IsZero() || n.After(now) {
				break
			}
			s = n
		}
		return s, true
	}
	return time.Time{}, false
}

// next returns the first occurrence strictly after t; zero when there is
// none within robfig/cron's five-year horizon.
func (c *wallCron) next(t time.Time) time.Time {
	// Occurrences fall on whole minutes: the first one after t is the
	// first from the next minute on. Asking from its 59th second spares
	// robfig/cron a walk through the seconds, most of Next's cost.
	n := t.Truncate(time.Minute).Add(59 * time.Second)
	for range 4 {
		n = c.spec.Next(n)
		if n.IsZero() || !c.repeated(n) {
			break
		}
	}
	if j := c.skipped(t, n); !j.IsZero() {
		return j
	}
	return n
}

// repeated reports whether t is the second occurrence of its wall time:
// the clocks went back over it.
func (c *wallCron) repeated(t time.Time) bool {
	w := t.In(c.loc)
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		e := t.Add(-d).In(c.loc)
		if e.Year() == w.Year() && e.YearDay() == w.YearDay() && e.Hour() == w.Hour() && e.Minute() == w.Minute() && e.Second() == w.Second() {
			return true
		}
	}
	return false
}

// skipped returns the first jump of the clocks after t and before n (any
// jump after t when n is zero) whose skipped wall times the expression
// matches: cron would have fired in the gap, so the occurrence happens at
// the jump. Zero when there is none.
func (c *wallCron) skipped(t, n time.Time) time.Time {
	cur := t
	for range 16 { // zones change a few times a year; n is at most five years on
		_, end := cur.In(c.loc).ZoneBounds()
		if end.IsZero() || (!n.IsZero() && !end.Before(n)) {
			return time.Time{}
		}
		_, before := cur.In(c.loc).Zone()
		_, after := end.In(c.loc).Zone()
		if after > before {
			// Read the expression on the old offset's clock: the wall
			// times of the gap are the instants [end, end+gap).
			old := c.spec
			old.Location = time.FixedZone("", before)
			gap := time.Duration(after-before) * time.Second
			if m := old.Next(end.Add(-time.Second)); !m.IsZero() && m.Before(end.Add(gap)) {
				return end
			}
		}
		cur = end
	}
	return time.Time{}
}
