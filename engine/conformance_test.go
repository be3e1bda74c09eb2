package engine_test

import (
	"context"
	"testing"

	"github.com/setpointhq/setpoint/internal/scenario"
)

// TestConformance replays the conformance corpus (the public one, a copy
// of ../shared/conformance, and Setpoint's own scenarios in its format,
// testdata/scenarios) directly against the
// engine, step by step, each step's request resolved as the server resolves
// it: the corpus is the engine's specification.
func TestConformance(t *testing.T) {
	loaded, bad, err := scenario.Load("../testdata/conformance/scenarios", "../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("unparsable scenario file: %v", b)
	}
	if len(loaded) == 0 {
		t.Fatal("no scenarios found")
	}
	for _, l := range loaded {
		sc := l.Scenario
		t.Run(sc.Name, func(t *testing.T) {
			mm, err := scenario.Replay(context.Background(), &sc, &scenario.EngineDriver{})
			if err != nil {
				t.Fatal(err)
			}
			if mm != nil {
				t.Errorf("%s: %s", l.Path, mm)
			}
		})
	}
}
