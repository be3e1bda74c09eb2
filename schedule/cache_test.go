package schedule_test

import (
	"errors"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/schedule"
)

// threeWindows are three windows in three zones, in fresh memory on each
// call.
func threeWindows() []schedule.Window {
	return []schedule.Window{
		{Name: "morning", TimeZone: "Europe/Berlin", Start: "0 7 * * 1-5", Duration: 2 * time.Hour, MinReplicas: 8},
		{Name: "day", TimeZone: "America/New_York", Start: "0 6 * * *", End: "0 20 * * *", MinReplicas: 4},
		{Name: "week", TimeZone: "UTC", Start: "0 8 * * 1", End: "0 18 * * 5", MinReplicas: 2},
	}
}

// Equal windows give the schedule compiled the first time; a schedule from
// the cache answers as one compiled anew.
func TestCacheHit(t *testing.T) {
	c := schedule.NewCache(16, 1<<20)
	first, err := c.Compile(threeWindows())
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Compile(threeWindows())
	if err != nil {
		t.Fatal(err)
	}
	if again != first || c.Len() != 1 {
		t.Errorf("equal windows compiled again (same schedule %v, %d cached); want the first one, 1 cached", again == first, c.Len())
	}
	fresh, err := schedule.Compile(threeWindows())
	if err != nil {
		t.Fatal(err)
	}
	for at := utc("2026-03-02 00:00"); at.Before(utc("2026-03-09 00:00")); at = at.Add(97 * time.Minute) {
		if diff := cmp.Diff(fresh.Proposals(at), again.Proposals(at)); diff != "" {
			t.Fatalf("at %s, cached (+) and compiled (-) schedules differ:\n%s", at, diff)
		}
	}
}

// Windows that differ in any one field, or whose texts only concatenate
// alike, are different keys.
func TestCacheKeyEveryField(t *testing.T) {
	base := schedule.Window{Name: "ab", TimeZone: "UTC", Start: "0 8 * * *", End: "0 18 * * *", MinReplicas: 3}
	edits := map[string]func(*schedule.Window){
		"name":         func(w *schedule.Window) { w.Name = "ac" },
		"time zone":    func(w *schedule.Window) { w.TimeZone = "Europe/Berlin" },
		"start":        func(w *schedule.Window) { w.Start = "0 9 * * *" },
		"end":          func(w *schedule.Window) { w.End = "0 17 * * *" },
		"duration":     func(w *schedule.Window) { w.End, w.Duration = "", time.Hour },
		"min replicas": func(w *schedule.Window) { w.MinReplicas = 4 },
		"texts shifted": func(w *schedule.Window) { // "ab"+"UTC" as "a"+"bUTC" would be one key unprefixed
			w.Name, w.TimeZone = "a", "bUTC"
		},
	}
	c := schedule.NewCache(64, 1<<20)
	want, err := c.Compile([]schedule.Window{base})
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range edits {
		w := base
		edit(&w)
		got, err := c.Compile([]schedule.Window{w})
		if name == "texts shifted" {
			if err == nil {
				t.Errorf("%s: compiled %q as a zone", name, w.TimeZone)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got == want {
			t.Errorf("%s changed, yet the cache answered the first window's schedule", name)
		}
	}
	// Two windows are not one with the texts of both.
	two, err := c.Compile([]schedule.Window{base, {Name: "x", Start: "@daily", Duration: time.Hour}})
	if err != nil || two == want {
		t.Errorf("two windows: %v, same as one: %v", err, two == want)
	}
}

// Invalid windows are Compile's errors, every time, and are not kept.
func TestCacheErrors(t *testing.T) {
	c := schedule.NewCache(16, 1<<20)
	bad := []schedule.Window{{Name: "x", TimeZone: "Mars/Olympus", Start: "@daily", Duration: time.Hour}}
	for range 2 {
		_, err := c.Compile(bad)
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || fe.Field != "schedules[0].timeZone" {
			t.Errorf("Compile(an unknown zone) = %v; want a FieldError on schedules[0].timeZone", err)
		}
	}
	if c.Len() != 0 {
		t.Errorf("%d schedules cached after errors; want 0", c.Len())
	}
}

// The least recently used schedule goes first once maxEntries are kept;
// a schedule estimated above maxBytes is compiled but not kept.
func TestCacheBounds(t *testing.T) {
	window := func(name string) []schedule.Window {
		return []schedule.Window{{Name: name, TimeZone: "UTC", Start: "@daily", Duration: time.Hour, MinReplicas: 1}}
	}
	c := schedule.NewCache(2, 1<<20)
	a, _ := c.Compile(window("a"))
	b, _ := c.Compile(window("b"))
	if again, _ := c.Compile(window("a")); again != a { // a is now the most recent
		t.Fatal("a was not cached")
	}
	if _, err := c.Compile(window("c")); err != nil || c.Len() != 2 {
		t.Fatalf("after a third schedule: %v, %d cached; want 2", err, c.Len())
	}
	if again, _ := c.Compile(window("a")); again != a {
		t.Error("a, the most recently used, was dropped")
	}
	if again, _ := c.Compile(window("b")); again == b {
		t.Error("b, the least recently used, was kept")
	}

	small := schedule.NewCache(100, 1024) // below one window's estimate
	s, err := small.Compile(window("a"))
	if err != nil || s == nil || len(s.Active(utc("2026-03-02 00:30"))) != 1 {
		t.Errorf("Compile through a cache too small to keep it = %v, %v; want the schedule", s, err)
	}
	if small.Len() != 0 {
		t.Errorf("%d cached above maxBytes; want 0", small.Len())
	}
}

// The cache keeps no reference to the caller's strings: a caller may
// reuse their memory (a request's buffer) after Compile.
func TestCacheCopiesWindows(t *testing.T) {
	mem := []byte("business")
	ws := []schedule.Window{{Name: unsafe.String(&mem[0], len(mem)), TimeZone: "UTC", Start: "@daily", Duration: time.Hour, MinReplicas: 1}}
	c := schedule.NewCache(16, 1<<20)
	s, err := c.Compile(ws)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, "xxxxxxxx")
	for _, w := range []*schedule.Schedule{s, mustCompile(t, c, "business")} {
		if a := w.Active(utc("2026-03-02 00:30")); len(a) != 1 || a[0].Window.Name != "business" {
			t.Errorf("after the caller's memory changed, the cached window is %+v; want business", a)
		}
	}
}

func mustCompile(t *testing.T, c *schedule.Cache, name string) *schedule.Schedule {
	t.Helper()
	s, err := c.Compile([]schedule.Window{{Name: name, TimeZone: "UTC", Start: "@daily", Duration: time.Hour, MinReplicas: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Concurrent compiles of the same windows all get a working schedule, and
// one is kept.
func TestCacheConcurrent(t *testing.T) {
	c := schedule.NewCache(16, 1<<20)
	var wg sync.WaitGroup
	got := make([]*schedule.Schedule, 8)
	for i := range got {
		wg.Go(func() {
			s, err := c.Compile(threeWindows())
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	kept, _ := c.Compile(threeWindows())
	for i, s := range got {
		if s == nil || len(s.Proposals(utc("2026-03-04 12:00"))) != len(kept.Proposals(utc("2026-03-04 12:00"))) {
			t.Errorf("goroutine %d got %v", i, s)
		}
	}
	if c.Len() != 1 {
		t.Errorf("%d cached; want 1", c.Len())
	}
}

// BenchmarkCompile is what a decision pays for three windows in three
// zones: compiled for each decision, and through a Cache that has them.
func BenchmarkCompile(b *testing.B) {
	b.Run("uncached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schedule.Compile(threeWindows()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := schedule.NewCache(16, 1<<20)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Compile(threeWindows()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
