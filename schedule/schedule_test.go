package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/schedule"
)

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestActiveAcrossDST checks windows on the days the clocks change in
// Europe/Berlin (2026-03-29 02:00 CET → 03:00 CEST; 2026-10-25 03:00 CEST
// → 02:00 CET) and America/New_York (2026-03-08 02:00 EST → 03:00 EDT;
// 2026-11-01 02:00 EDT → 01:00 EST). Instants are UTC.
func TestActiveAcrossDST(t *testing.T) {
	const berlin, newYork = "Europe/Berlin", "America/New_York"
	cases := []struct {
		name      string
		w         schedule.Window
		at        string
		wantSince string // "" : inactive
		wantUntil string
	}{
		// Wall-clock windows follow the clock: 09–17 local is 08–16 UTC in
		// winter, 07–15 UTC in summer.
		{"berlin winter, open", schedule.Window{TimeZone: berlin, Start: "0 9 * * *", End: "0 17 * * *"}, "2026-03-28 08:30", "2026-03-28 08:00", "2026-03-28 16:00"},
		{"berlin winter, before", schedule.Window{TimeZone: berlin, Start: "0 9 * * *", End: "0 17 * * *"}, "2026-03-28 07:30", "", ""},
		{"berlin spring-forward day, open", schedule.Window{TimeZone: berlin, Start: "0 9 * * *", End: "0 17 * * *"}, "2026-03-29 07:30", "2026-03-29 07:00", "2026-03-29 15:00"},
		{"berlin spring-forward day, closed at 17:30 CEST", schedule.Window{TimeZone: berlin, Start: "0 9 * * *", End: "0 17 * * *"}, "2026-03-29 15:30", "", ""},
		// A start in the skipped hour opens the window at the jump.
		{"berlin skipped start opens at the jump", schedule.Window{TimeZone: berlin, Start: "30 2 * * *", Duration: time.Hour}, "2026-03-29 01:10", "2026-03-29 01:00", "2026-03-29 02:00"},
		{"berlin skipped start, before the jump", schedule.Window{TimeZone: berlin, Start: "30 2 * * *", Duration: time.Hour}, "2026-03-29 00:45", "", ""},
		{"berlin skipped start, the day after", schedule.Window{TimeZone: berlin, Start: "30 2 * * *", Duration: time.Hour}, "2026-03-30 00:40", "2026-03-30 00:30", "2026-03-30 01:30"},
		// A duration is elapsed time: 22:00 CEST + 8h is 05:00 CET.
		{"berlin duration over fall-back, open", schedule.Window{TimeZone: berlin, Start: "0 22 * * *", Duration: 8 * time.Hour}, "2026-10-25 03:30", "2026-10-24 20:00", "2026-10-25 04:00"},
		{"berlin duration over fall-back, closed", schedule.Window{TimeZone: berlin, Start: "0 22 * * *", Duration: 8 * time.Hour}, "2026-10-25 04:30", "", ""},
		// A repeated start happens once: the window opened at 02:30 CEST
		// and is not reopened at 02:30 CET.
		{"berlin repeated start counts once", schedule.Window{TimeZone: berlin, Start: "30 2 * * *", End: "0 4 * * *"}, "2026-10-25 01:45", "2026-10-25 00:30", "2026-10-25 03:00"},
		{"berlin repeated start does not reopen", schedule.Window{TimeZone: berlin, Start: "30 2 * * *", End: "45 2 * * *"}, "2026-10-25 01:40", "", ""},
		{"berlin wall-clock end after fall-back", schedule.Window{TimeZone: berlin, Start: "0 1 * * *", End: "0 4 * * *"}, "2026-10-25 02:30", "2026-10-24 23:00", "2026-10-25 03:00"},
		// New York.
		{"new york skipped start opens at the jump", schedule.Window{TimeZone: newYork, Start: "30 2 * * *", End: "0 6 * * *"}, "2026-03-08 07:05", "2026-03-08 07:00", "2026-03-08 10:00"},
		{"new york the day before", schedule.Window{TimeZone: newYork, Start: "30 2 * * *", End: "0 6 * * *"}, "2026-03-07 07:35", "2026-03-07 07:30", "2026-03-07 11:00"},
		{"new york business hours in EDT", schedule.Window{TimeZone: newYork, Start: "0 9 * * 1-5", End: "0 17 * * 1-5"}, "2026-10-30 13:30", "2026-10-30 13:00", "2026-10-30 21:00"},
		{"new york business hours in EST", schedule.Window{TimeZone: newYork, Start: "0 9 * * 1-5", End: "0 17 * * 1-5"}, "2026-11-02 14:30", "2026-11-02 14:00", "2026-11-02 22:00"},
		{"new york business hours, 09:30 EDT would be 08:30 EST", schedule.Window{TimeZone: newYork, Start: "0 9 * * 1-5", End: "0 17 * * 1-5"}, "2026-11-02 13:30", "", ""},
		{"new york duration over fall-back", schedule.Window{TimeZone: newYork, Start: "0 0 * * *", Duration: 3 * time.Hour}, "2026-11-01 06:30", "2026-11-01 04:00", "2026-11-01 07:00"},
		{"new york weekend", schedule.Window{TimeZone: newYork, Start: "0 9 * * 1-5", End: "0 17 * * 1-5"}, "2026-11-01 15:00", "", ""},
		// Weekly window, found within the lookback.
		{"utc week, wednesday", schedule.Window{Start: "0 8 * * 1", End: "0 18 * * 5"}, "2026-03-04 12:00", "2026-03-02 08:00", "2026-03-06 18:00"},
		{"utc week, saturday", schedule.Window{Start: "0 8 * * 1", End: "0 18 * * 5"}, "2026-03-07 12:00", "", ""},
		{"utc every five minutes, one minute long", schedule.Window{Start: "*/5 * * * *", Duration: time.Minute}, "2026-03-07 12:10", "2026-03-07 12:10", "2026-03-07 12:11"},
		{"utc every five minutes, between", schedule.Window{Start: "*/5 * * * *", Duration: time.Minute}, "2026-03-07 12:11", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.w.Name, tc.w.MinReplicas = "w", 5
			s, err := schedule.Compile([]schedule.Window{tc.w})
			if err != nil {
				t.Fatal(err)
			}
			got := s.Active(utc(tc.at))
			if tc.wantSince == "" {
				if len(got) != 0 {
					t.Errorf("active %+v; want closed", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("closed; want open since %s", tc.wantSince)
			}
			if !got[0].Since.Equal(utc(tc.wantSince)) || !got[0].Until.Equal(utc(tc.wantUntil)) {
				t.Errorf("open %s – %s; want %s – %s", got[0].Since.UTC(), got[0].Until.UTC(), tc.wantSince, tc.wantUntil)
			}
		})
	}
}

func TestProposals(t *testing.T) {
	s, err := schedule.Compile([]schedule.Window{
		{Name: "morning", TimeZone: "Europe/Berlin", Start: "0 7 * * *", Duration: 2 * time.Hour, MinReplicas: 8},
		{Name: "day", TimeZone: "Europe/Berlin", Start: "0 6 * * *", End: "0 20 * * *", MinReplicas: 4},
		{Name: "night", TimeZone: "Europe/Berlin", Start: "0 22 * * *", End: "0 5 * * *", MinReplicas: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Proposals(utc("2026-06-01 06:30")) // 08:30 CEST
	if len(got) != 2 || got[0].Name != "schedule morning" || got[0].Replicas != 8 || got[1].Name != "schedule day" || got[1].Replicas != 4 {
		t.Fatalf("proposals %+v; want morning 8 and day 4", got)
	}
	for _, p := range got {
		if p.Kind != engine.ProposalSchedule || !strings.Contains(p.Explanation, "CEST") {
			t.Errorf("proposal %+v; want a Schedule proposal explained in local time", p)
		}
	}
	if got := s.Proposals(utc("2026-06-01 21:00")); len(got) != 1 || got[0].Name != "schedule night" {
		t.Errorf("at 23:00 CEST: %+v; want night", got)
	}
}

func TestCompileErrors(t *testing.T) {
	ok := schedule.Window{Name: "w", TimeZone: "UTC", Start: "0 9 * * *", Duration: time.Hour, MinReplicas: 1}
	cases := []struct {
		name  string
		edit  func(*schedule.Window)
		field string
	}{
		{"no name", func(w *schedule.Window) { w.Name = "" }, "schedules[1].name"},
		{"duplicate name", func(w *schedule.Window) { w.Name = "w" }, "schedules[1].name"},
		{"unknown zone", func(w *schedule.Window) { w.TimeZone = "Mars/Olympus" }, "schedules[1].timeZone"},
		{"local zone", func(w *schedule.Window) { w.TimeZone = "Local" }, "schedules[1].timeZone"},
		{"bad cron", func(w *schedule.Window) { w.Start = "61 * * * *" }, "schedules[1].start"},
		{"six fields", func(w *schedule.Window) { w.Start = "0 0 9 * * *" }, "schedules[1].start"},
		{"every", func(w *schedule.Window) { w.Start = "@every 1h" }, "schedules[1].start"},
		{"end and duration", func(w *schedule.Window) { w.End = "0 10 * * *" }, "schedules[1].duration"},
		{"neither", func(w *schedule.Window) { w.Duration = 0 }, "schedules[1].duration"},
		{"too long", func(w *schedule.Window) { w.Duration = 9 * 24 * time.Hour }, "schedules[1].duration"},
		{"bad end", func(w *schedule.Window) { w.Duration, w.End = 0, "x" }, "schedules[1].end"},
		{"end equals start", func(w *schedule.Window) { w.Duration, w.End = 0, w.Start }, "schedules[1].end"},
		{"negative floor", func(w *schedule.Window) { w.MinReplicas = -1 }, "schedules[1].minReplicas"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := ok
			w.Name = "v"
			tc.edit(&w)
			_, err := schedule.Compile([]schedule.Window{ok, w})
			var fe *schedule.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, schedule.ErrInvalid) {
				t.Errorf("Compile = %v; want a FieldError on %s", err, tc.field)
			}
		})
	}
	if _, err := schedule.Compile(make([]schedule.Window, schedule.MaxWindows+1)); err == nil {
		t.Error("Compile accepted more than MaxWindows windows")
	}
}

// BenchmarkProposals measures a decision's cost of three windows.
func BenchmarkProposals(b *testing.B) {
	s, err := schedule.Compile([]schedule.Window{
		{Name: "morning", TimeZone: "Europe/Berlin", Start: "0 7 * * 1-5", Duration: 2 * time.Hour, MinReplicas: 8},
		{Name: "day", TimeZone: "America/New_York", Start: "0 6 * * *", End: "0 20 * * *", MinReplicas: 4},
		{Name: "week", TimeZone: "UTC", Start: "0 8 * * 1", End: "0 18 * * 5", MinReplicas: 2},
	})
	if err != nil {
		b.Fatal(err)
	}
	at := utc("2026-03-04 12:00")
	for b.Loop() {
		_ = s.Proposals(at)
	}
}
