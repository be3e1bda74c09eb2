package forecast_test

import (
	"testing"
	"time"

	"github.com/setpointhq/setpoint/forecast"
)

// A fit through the cache predicts as Fit does; a history whose closed
// steps change is fitted again, one whose open step alone changes is not;
// the cache keeps at most its bound.
func TestCacheFit(t *testing.T) {
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	var h forecast.History
	at := start
	for ; at.Before(start.Add(3 * forecast.Day)); at = at.Add(forecast.Step) {
		h.Add(at, daily(at))
	}
	cfg := forecast.Config{Lead: 30 * time.Minute}
	c := forecast.NewCache(2)
	now := at.Add(time.Minute)
	want := forecast.Fit(&h, cfg)
	wantF, ok := want.Predict(now)
	if !ok {
		t.Fatalf("Fit is silent: %s", want.Silent)
	}
	m := c.Fit(&h, cfg)
	if f, ok := m.Predict(now); !ok || f != wantF {
		t.Errorf("cached fit predicts %+v, %v; want %+v", f, ok, wantF)
	}
	h.Add(at.Add(-time.Minute), 3) // the open step only
	if again := c.Fit(&h, cfg); again != m || c.Len() != 1 {
		t.Errorf("a sample in the open step refitted (len %d)", c.Len())
	}
	if other := c.Fit(&h, forecast.Config{Lead: time.Hour}); other == m || c.Len() != 2 {
		t.Errorf("another lead time shares the model (len %d)", c.Len())
	}
	h.Add(at.Add(time.Minute), 3) // closes a step
	if next := c.Fit(&h, cfg); next == m || c.Len() != 2 {
		t.Errorf("a closed step did not refit, or the bound of 2 is not kept (len %d)", c.Len())
	}
}
