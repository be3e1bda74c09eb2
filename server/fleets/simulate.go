package fleets

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/setpointhq/setpoint/fleet"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
)

// SimulateFleet runs a fleet what-if: each step's reports are received at
// the step's time and the fleet decides over every member's latest report
// with fleet.Decide, its record carried from step to step in memory (from
// seed_from's stored fleet when set). Nothing stored changes. The steps
// are bounded as Simulate's, and the call counts against the same
// per-principal and server-wide Simulate bounds (package fairness).
func (s *Service) SimulateFleet(ctx context.Context, req *setpointv1.SimulateFleetRequest) (*setpointv1.SimulateFleetResponse, error) {
	steps := req.GetSteps()
	if n := len(steps); n == 0 || n > s.Limits.MaxSteps {
		ve := &setpointv1.ValidationError{}
		ve.Add("steps", "must have 1 to %d steps, got %d", s.Limits.MaxSteps, n)
		return nil, s.status(ctx, ve)
	}
	sim := simulation{spec: req.GetSpec(), key: &setpointv1.FleetKey{Namespace: "simulated", Name: "fleet"}}
	if seed := req.GetSeedFrom(); seed != nil {
		rec, _, err := s.get(ctx, seed, (*caller).mayRead)
		if err != nil {
			return nil, err
		}
		if sim.st, err = decodeState(&rec); err != nil {
			return nil, s.status(ctx, err)
		}
		sim.rec, sim.key = rec, seed
	}
	resp := &setpointv1.SimulateFleetResponse{}
	for i, step := range steps {
		if err := ctx.Err(); err != nil {
			return nil, s.status(ctx, err)
		}
		out, err := sim.step(i, step)
		if err != nil {
			return nil, s.status(ctx, err)
		}
		resp.Steps = append(resp.Steps, out)
	}
	return resp, nil
}

// simulation is a SimulateFleet call's state between steps.
type simulation struct {
	key  *setpointv1.FleetKey
	spec *setpointv1.FleetSpec
	// rec is the simulated fleet's record and st its state; the reports
	// in st are the members' latest, as a stored fleet's.
	rec target.Record
	st  state
	// last is the time of the previous step.
	last time.Time
}

// step runs step i: it stores the step's reports and decides.
func (sim *simulation) step(i int, step *setpointv1.SimulateFleetStep) (*setpointv1.SimulateFleetStepResult, error) {
	f := "steps[" + strconv.Itoa(i) + "]"
	if step.GetTime() == nil || step.GetTime().CheckValid() != nil {
		return nil, violation(f+".time", "must be a valid timestamp")
	}
	now := step.GetTime().AsTime()
	if i > 0 && !now.After(sim.last) {
		return nil, violation(f+".time", "must be after the previous step's time")
	}
	sim.last = now
	specAt := "spec"
	if step.GetSpec() != nil {
		sim.spec, specAt = step.GetSpec(), f+".spec"
	}
	r, err := resolve(sim.key, sim.spec, now)
	if err != nil {
		return nil, reprefix(err, map[string]string{"spec": specAt}, specAt)
	}
	sim.st.keepMembers(&r.fleet)
	seen := map[string]bool{}
	for j, rep := range step.GetReports() {
		rf := fmt.Sprintf("%s.reports[%d]", f, j)
		switch m := rep.GetMember(); {
		case !isMember(&r.fleet, m):
			return nil, violation(rf+".member", fmt.Sprintf("%q is not a member of the fleet", m))
		case seen[m]:
			return nil, violation(rf+".member", fmt.Sprintf("a second report of %q in the step", m))
		default:
			seen[m] = true
		}
		if rep.GetScale() == nil {
			rep = sim.applied(rep)
		}
		if _, err := r.report(rep, now, rf+"."); err != nil {
			return nil, err
		}
		if err := sim.st.setReport(rep, now); err != nil {
			return nil, err
		}
	}
	out := &setpointv1.SimulateFleetStepResult{Time: step.GetTime()}
	switch err := decide(&sim.rec, &sim.st, &r, "simulated-"+strconv.Itoa(i), now); {
	case errors.Is(err, fleet.ErrNoHealthyMember):
		out.Error = err.Error()
	case err != nil:
		return nil, err
	default:
		out.Decision = convert.Decision(*sim.rec.Last)
		out.Decision.DecisionId = ""
	}
	out.Split = splitMessage(&sim.st)
	for _, m := range r.fleet.Members {
		out.Members = append(out.Members, memberStatus(&sim.st, m.Name))
	}
	return out, nil
}

// applied returns rep with the member's share in the last split as its
// replicas: the simulation applies every split.
func (sim *simulation) applied(rep *setpointv1.FleetReport) *setpointv1.FleetReport {
	var n int32
	if sh := sim.st.share(rep.GetMember()); sh != nil {
		n = sh.Replicas
	}
	out := &setpointv1.FleetReport{
		Member: rep.GetMember(), Scale: &setpointv1.Scale{Replicas: n, StatusReplicas: n},
		Pods: rep.GetPods(), ResourceMetrics: rep.GetResourceMetrics(), Observations: rep.GetObservations(), CannotScale: rep.GetCannotScale(),
	}
	return out
}

// violation is a *setpointv1.ValidationError of one field.
func violation(field, why string) error {
	ve := &setpointv1.ValidationError{}
	ve.Add(field, "%s", why)
	return ve
}
