package metriclabel_test

import (
	"testing"

	"github.com/setpointhq/setpoint/hpa/metriclabel"
)

func TestActionOf(t *testing.T) {
	tests := []struct {
		name             string
		rescale          bool
		desired, current int32
		want             string
	}{
		{"more", true, 5, 3, metriclabel.ActionScaleUp},
		{"fewer", true, 2, 3, metriclabel.ActionScaleDown},
		{"same", true, 3, 3, metriclabel.ActionNone},
		{"no rescale, more", false, 5, 3, metriclabel.ActionNone},
		{"no rescale, fewer", false, 1, 3, metriclabel.ActionNone},
		{"from zero", true, 1, 0, metriclabel.ActionScaleUp},
	}
	for _, tt := range tests {
		if got := metriclabel.ActionOf(tt.rescale, tt.desired, tt.current); got != tt.want {
			t.Errorf("%s: ActionOf(%v, %d, %d) = %q, want %q", tt.name, tt.rescale, tt.desired, tt.current, got, tt.want)
		}
	}
}
