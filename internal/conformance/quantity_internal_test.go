package conformance

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestQuantityReadsBackExactly: every milli-value Setpoint can answer reads
// back as itself, including the negative 19-digit ones apimachinery's
// MilliValue gets wrong, and a quantity that is not a whole int64 number of
// thousandths is an error, not another number.
func TestQuantityReadsBackExactly(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 999, -1000, 1500, 4709120739521, -1063726787889721773, 1063726787889721773,
		-4611686018427387904, math.MaxInt64, math.MinInt64 + 1, math.MinInt64} {
		for _, f := range []resource.Format{resource.DecimalSI, resource.BinarySI} {
			s := resource.NewMilliQuantity(v, f).String()
			got, err := quantity(s)
			if err != nil || got.Milli != v {
				t.Errorf("quantity(%q) = %+v, %v; want milli %d", s, got, err, v)
			}
		}
	}
	for _, s := range []string{"1n", "1u", "-1500u", "9223372036854775808m", "-9223372036854775809m", "1e20"} {
		if got, err := quantity(s); err == nil {
			t.Errorf("quantity(%q) = %+v; want an error", s, got)
		}
	}
	if got, err := quantity("12e-3"); err != nil || got.Milli != 12 {
		t.Errorf(`quantity("12e-3") = %+v, %v; want 12`, got, err)
	}
}
