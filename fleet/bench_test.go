package fleet_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/fleet"
	"github.com/setpointhq/setpoint/target"
)

// BenchmarkDecide measures one fleet decision (pool, target.Decide, split)
// over three members of 100 pods each with a cpu utilization metric, and,
// for comparison in the same run, one target's decision over the pooled
// input (what pooling and splitting add is the difference).
func BenchmarkDecide(b *testing.B) {
	spec := members("a", "b", "c")
	reports := []fleet.Report{loaded("a", t0, 100, 70), loaded("b", t0, 100, 80), loaded("c", t0, 100, 90)}
	in := fleet.Input{Engine: base(cpu60), Fleet: spec, Reports: reports}
	in.Engine.Spec.MaxReplicas = 1000
	b.Run("fleet", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var rec fleet.Record
			if err := fleet.Decide(&rec, in, strconv.Itoa(i), t0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-target", func(b *testing.B) {
		p, err := fleet.Pool(spec, in.Engine, reports, t0)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var rec target.Record
			if err := target.Decide(&rec, target.Input{Engine: p.Input}, strconv.Itoa(i), t0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDivide measures one split of 1,000 replicas over 20 members with
// mixed weights and bounds, one of them returning under a paced policy.
func BenchmarkDivide(b *testing.B) {
	var ms []fleet.Member
	for i := range 20 {
		mb := fleet.Member{Name: "m" + strconv.Itoa(i), Weight: int32(1 + i%5)}
		if i%4 == 0 {
			mb.Max = ptr(40)
		}
		if i%7 == 0 {
			mb.Min = 10
		}
		ms = append(ms, mb)
	}
	ex := pooledAll(len(ms))
	ex[3] = fleet.ExcludedStale
	_, prev := fleet.Divide(fleet.SplitInput{Total: 1000, Members: ms, Exclusion: ex, ScaleDown: slowDown, Now: t0})
	in := fleet.SplitInput{Total: 1000, Members: ms, Exclusion: pooledAll(len(ms)), Previous: prev, ScaleDown: slowDown, Now: t0.Add(15 * time.Second)}
	b.ReportAllocs()
	for b.Loop() {
		fleet.Divide(in)
	}
}
