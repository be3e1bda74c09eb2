package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/spf13/cobra"
)

func simulateCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "simulate -f FILE [--seed-from " + keyArg + "]",
		GroupID: "ask",
		Short:   "What-if: run a series of inputs through the engine, store nothing",
		Long: `Ask what the autoscaler would do over a series of inputs (a SimulateRequest
in JSON or YAML: a spec and a series of inputs, or metric values with a
pod model) and print the decision and conditions at every step. Nothing
is stored; --seed-from starts from a stored target's history and status.
examples/ has files to start from.`,
		Example: `  setpointctl simulate -f examples/simulate-pod-model.yaml -o wide
  setpointctl simulate -f what-if.yaml --seed-from dev/shop/web`,
		Args: noArgs,
	}
	file := fileFlag(cmd, "SimulateRequest in protojson or YAML; - reads stdin")
	seed := cmd.Flags().String("seed-from", "", "start from this stored target's history and status ("+keyArg+"; replaces the file's seedFrom)")
	cmd.RegisterFlagCompletionFunc("seed-from", e.completeTargets)
	out := outputFlag(cmd, "table", "wide", "json", "yaml")
	cmd.RunE = serverRun(e, func(ctx context.Context, _ []string) error {
		if *file == "" {
			return usagef(cmd, "simulate needs -f FILE, the SimulateRequest to run (JSON or YAML; - reads stdin), e.g. %s", exampleOf(cmd))
		}
		req := &setpointv1.SimulateRequest{}
		if err := readMessage(e.stdin, *file, req); err != nil {
			return err
		}
		if *seed != "" {
			k, err := setpointclient.ParseKey(*seed)
			if err != nil {
				return err
			}
			req.SeedFrom = k
		}
		resp, err := e.client.Simulate(ctx, req)
		if err != nil {
			return err
		}
		if *out == "json" || *out == "yaml" {
			return printMessage(e.stdout, *out, resp)
		}
		steps := make([]simStep, len(resp.GetSteps()))
		for i, r := range resp.GetSteps() {
			steps[i] = simStepOf(r)
		}
		return printSimulation(e.stdout, steps, *out == "wide")
	})
	return cmd
}

// simStep is one simulated step as the table shows it: the fields the
// conformance corpus records, plus (wide) how the decision was reached.
type simStep struct {
	Time             time.Time
	Current, Desired int32
	// Scale is the count written, nil when nothing is.
	Scale *int32
	// Failed is true when the decision carries an error.
	Failed     bool
	Conditions []simCondition
	// Proposal and Why explain the decision (wide only); Why ends with the
	// step's notes.
	Proposal int32
	Why      string
	// Extra are the cells of the extra columns a caller of
	// printSimulationWith adds (a fleet's split).
	Extra []string
}

// simCondition is one condition's type, status and reason.
type simCondition struct{ Type, Status, Reason string }

func simStepOf(r *setpointv1.SimulateStepResult) simStep {
	d := r.GetDecision()
	st := d.GetStatus()
	s := simStep{
		Time:     r.GetTime().AsTime().UTC(),
		Current:  st.GetCurrentReplicas(),
		Desired:  st.GetDesiredReplicas(),
		Failed:   d.GetError() != "",
		Proposal: d.GetExplanation().GetProposal(),
	}
	if d.GetRescale() {
		n := d.GetDesiredReplicas()
		s.Scale = &n
	}
	for _, c := range st.GetConditions() {
		s.Conditions = append(s.Conditions, simCondition{c.GetType(), c.GetStatus(), c.GetReason()})
	}
	var why []string
	for _, step := range d.GetExplanation().GetSteps() {
		why = append(why, fmt.Sprintf("%s %d→%d (%s)", step.GetKind(), step.GetFrom(), step.GetTo(), step.GetReason()))
	}
	if d.GetError() != "" {
		why = append(why, "error: "+d.GetError())
	}
	why = append(why, r.GetNotes()...) // why a forecast proposed nothing
	s.Why = strings.Join(why, "; ")
	return s
}

// conditionOrder are the condition columns, in the order the controller
// sets them, then Setpoint's FallbackActive.
var conditionOrder = []string{"AbleToScale", "ScalingActive", "ScalingLimited", "ScaledToZero", "FallbackActive"}

// optionalConditions are the condition columns shown only when a step has
// them.
var optionalConditions = map[string]bool{"ScaledToZero": true, "FallbackActive": true}

// printSimulation writes the step table: one row per step with the
// replica counts, the rescale and each condition as Status/Reason.
// Columns that no step uses (ScaledToZero, FallbackActive, ERROR) are
// left out.
func printSimulation(w io.Writer, steps []simStep, wide bool) error {
	return printSimulationWith(w, steps, wide)
}

// printSimulationWith is printSimulation with extra columns after the
// conditions (each step's Extra cells).
func printSimulationWith(w io.Writer, steps []simStep, wide bool, extra ...string) error {
	used := map[string]bool{}
	failed := false
	for _, s := range steps {
		for _, c := range s.Conditions {
			used[c.Type] = true
		}
		failed = failed || s.Failed
	}
	var conds []string
	for _, c := range conditionOrder {
		if used[c] || !optionalConditions[c] {
			conds = append(conds, c)
		}
	}
	header := []string{"STEP", "TIME", "CURRENT", "DESIRED", "SCALE"}
	header = append(header, upper(conds)...)
	if failed {
		header = append(header, "ERROR")
	}
	header = append(header, extra...)
	if wide {
		header = append(header, "PROPOSAL", "WHY")
	}
	t := newTable(w, header...)
	for i, s := range steps {
		row := []string{fmt.Sprint(i), s.Time.Format(timeFormat), fmt.Sprint(s.Current), fmt.Sprint(s.Desired), ""}
		if s.Scale != nil {
			row[4] = fmt.Sprintf("→ %d", *s.Scale)
		}
		for _, typ := range conds {
			cell := ""
			if j := slices.IndexFunc(s.Conditions, func(c simCondition) bool { return c.Type == typ }); j >= 0 {
				cell = s.Conditions[j].Status + "/" + s.Conditions[j].Reason
			}
			row = append(row, cell)
		}
		if failed {
			row = append(row, map[bool]string{true: "yes", false: ""}[s.Failed])
		}
		for i := range extra {
			cell := ""
			if i < len(s.Extra) {
				cell = s.Extra[i]
			}
			row = append(row, cell)
		}
		if wide {
			row = append(row, fmt.Sprint(s.Proposal), s.Why)
		}
		t.row(row...)
	}
	return t.flush()
}

func upper(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToUpper(s)
	}
	return out
}
