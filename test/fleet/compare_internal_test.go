package fleet

import (
	"testing"
	"time"
)

// TestCompareTrajectories pins the differential's tolerance: a count
// within the reference's counts of the window passes, one outside them
// does not, and so does a different final count.
func TestCompareTrajectories(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	pts := func(pairs ...float64) []replicaPoint {
		var out []replicaPoint
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, replicaPoint{at(pairs[i]), int32(pairs[i+1])})
		}
		return out
	}
	const window = 7 * time.Second
	end := at(60)
	ref := pts(0, 1, 6.6, 2, 11.4, 3, 12.6, 5, 40.6, 2)
	tests := []struct {
		name  string
		s     []replicaPoint
		fails bool
	}{
		{"the same steps", pts(0, 1, 6.6, 2, 11.4, 3, 12.6, 5, 40.6, 2), false},
		{"a step the reference skipped, on its ramp", pts(1, 1, 6.6, 2, 13, 4, 15.3, 5, 42.4, 2), false},
		{"the same steps a window late", pts(0, 1, 14, 2, 19, 3, 20, 5, 50, 2), true},
		{"above the reference's counts", pts(0, 1, 6.6, 2, 12, 6, 40.6, 2), true},
		{"a steady count the reference never held", pts(0, 1, 6.6, 2, 12.6, 5, 25, 4, 40.6, 2), true},
		{"a different end", pts(0, 1, 6.6, 2, 11.4, 3, 12.6, 5, 40.6, 3), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diffs := compareTrajectories(ref, tt.s, t0, end, window)
			if got := len(diffs) > 0; got != tt.fails {
				t.Errorf("differs = %v (%q), want %v", got, diffs, tt.fails)
			}
		})
	}
}
