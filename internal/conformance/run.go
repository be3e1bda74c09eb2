// Package conformance replays the HPA conformance corpus through a real
// Setpoint server over gRPC: the check that the service, not only the
// engine, answers like the Kubernetes controller.
//
// Each step is sent as the RecommendRequest the agent would send for what
// the controller read (package hpa, with the spec in force at that step:
// a step may edit it), and an applied rescale is reported with Observe.
// Every scenario gets its own target key, so no history is shared between
// scenarios; scenarios run one after another because they move the
// server's injected clock to each step's time.
package conformance

import (
	"context"
	"fmt"
	"io"

	"github.com/setpointhq/setpoint/internal/scenario"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// Result counts the scenarios of a run. A file that cannot be parsed
// counts as one failed scenario.
type Result struct {
	// Passed is the number of scenarios whose every step matched.
	Passed int
	// Failed is the number of scenarios that did not.
	Failed int
}

// Run replays every scenario found under paths through client, moving
// clock (the server's clock) to each step's time, and writes a line per
// failing scenario to out, naming the first differing step and field, then
// the summary line "conformance: N passed, M failed". err is for a path
// that cannot be read at all.
func Run(ctx context.Context, client setpointv1.AutoscalerServiceClient, clock *Clock, out io.Writer, paths ...string) (Result, error) {
	var res Result
	loaded, bad, err := scenario.Load(paths...)
	if err != nil {
		return res, err
	}
	for _, b := range bad {
		res.Failed++
		fmt.Fprintf(out, "FAIL %s: cannot parse: %v\n", b.Path, b.Err)
	}
	for i, l := range loaded {
		sc := l.Scenario
		drv := &grpcDriver{
			client: client,
			clock:  clock,
			key:    &setpointv1.TargetKey{Cluster: "conformance", Namespace: sc.HPA.Namespace, Name: fmt.Sprintf("%s-%d", sc.HPA.Name, i)},
		}
		if drv.key.Namespace == "" {
			drv.key.Namespace = "default"
		}
		mm, err := scenario.Replay(ctx, &sc, drv)
		switch {
		case err != nil:
			res.Failed++
			fmt.Fprintf(out, "FAIL %s (%s): %v\n", sc.Name, l.Path, err)
		case mm != nil:
			res.Failed++
			fmt.Fprintf(out, "FAIL %s (%s): %s\n", sc.Name, l.Path, mm)
		default:
			res.Passed++
		}
	}
	fmt.Fprintf(out, "conformance: %d passed, %d failed\n", res.Passed, res.Failed)
	return res, nil
}
