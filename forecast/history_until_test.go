package forecast

import (
	"testing"
	"time"
)

// TestHistoryUntil: a history as it stood at t keeps the steps closed by
// t and nothing after, without the open step.
func TestHistoryUntil(t *testing.T) {
	t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var h History
	for i := range 6 { // steps 0–4 closed, step 5 open
		h.Add(t0.Add(time.Duration(i)*Step), float64(i+1))
	}
	tests := []struct {
		name  string
		at    time.Time
		steps int
	}{
		{"before the history", t0.Add(-time.Hour), 0},
		{"at its start", t0, 0},
		{"inside the first step", t0.Add(Step / 2), 0},
		{"after two steps closed", t0.Add(2 * Step), 2},
		{"inside the third step", t0.Add(2*Step + time.Minute), 2},
		{"after the last closed step", t0.Add(10 * Step), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := h.Until(tt.at)
			if len(u.Points) != tt.steps || u.OpenCount != 0 {
				t.Fatalf("Until: %d points, %d open samples; want %d points, none open", len(u.Points), u.OpenCount, tt.steps)
			}
			for i, v := range u.Values() {
				if want := h.Values()[i]; v != want {
					t.Errorf("step %d = %v, want %v", i, v, want)
				}
			}
			if len(h.Points) != 5 {
				t.Errorf("Until changed the history: %d points", len(h.Points))
			}
		})
	}
}
