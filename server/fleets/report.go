package fleets

import (
	"context"
	"errors"
	"time"

	"github.com/setpointhq/setpoint/fleet"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
)

// Report records a member's report and answers its share: one store
// update of the fleet's record stores the report and, when the fleet's
// last decision is nearly a sync period old, decides (see reported).
func (s *Service) Report(ctx context.Context, req *setpointv1.ReportRequest) (*setpointv1.ReportResponse, error) {
	who, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	now, id := s.Now(), s.NewID()
	var resp *setpointv1.ReportResponse
	_, err = s.Store.Update(ctx, Key(req.GetFleet()), func(rec *target.Record) (err error) {
		resp, err = reported(rec, who, req.GetReport(), id, now)
		return err
	})
	if err != nil {
		return nil, s.status(ctx, who.hide(err))
	}
	return resp, nil
}

// reported is Report's update of the fleet's record rec: the report of
// who is stored as received at now; when the fleet has no decision yet or
// its last one is nearly a sync period old (decidesAfter), fleet.Decide
// decides over
// every member's latest report as decision id, and a rescale is recorded
// as applied (target.Observe): the service applies a total by splitting
// it. When no member can be pooled the report is still stored and the
// answer carries the last split. It depends on its arguments only (the
// store may run it more than once).
func reported(rec *target.Record, who *caller, rep *setpointv1.FleetReport, id string, now time.Time) (*setpointv1.ReportResponse, error) {
	spec, err := storedSpec(rec)
	if err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, errNoFleet
	}
	if !who.mayReport(spec, rep.GetMember()) {
		return nil, errDenied
	}
	key := &setpointv1.FleetKey{Namespace: rec.Key.Namespace, Name: rec.Key.Name}
	r, err := resolve(key, spec, now)
	if err != nil {
		return nil, err // a stored spec resolved when it was put: a new server refuses it
	}
	if !isMember(&r.fleet, rep.GetMember()) {
		ve := &setpointv1.ValidationError{}
		ve.Add("report.member", "%q is not a member of the fleet", rep.GetMember())
		return nil, ve
	}
	if _, err := r.report(rep, now, "report."); err != nil {
		return nil, err
	}
	st, err := decodeState(rec)
	if err != nil {
		return nil, err
	}
	if err := st.setReport(rep, now); err != nil {
		return nil, err
	}
	decided := false
	if rec.Last == nil || now.Sub(rec.Last.At) >= decidesAfter(r.sync) {
		switch err := decide(rec, &st, &r, id, now); {
		case errors.Is(err, fleet.ErrNoHealthyMember): // the report is stored; the answer is the last split
		case err != nil:
			return nil, err
		default:
			decided = true
		}
	}
	st.answer(rep.GetMember())
	rec.LastSeen = later(now, rec.LastSeen)
	if rec.Fleet, err = st.encode(); err != nil {
		return nil, err
	}
	resp := &setpointv1.ReportResponse{Decided: decided, Split: splitMessage(&st), Share: shareMessage(st.share(rep.GetMember()))}
	if st.split != nil {
		resp.Total = st.split.Total
	}
	if rec.Last != nil {
		resp.Decision = convert.Decision(*rec.Last)
	}
	if resp.Spec, err = resolvedSpec(&r); err != nil {
		return nil, err
	}
	return resp, nil
}

// syncSlack is the part of a sync period by which a report may come
// early and still decide: a tenth.
const syncSlack = 10

// decidesAfter is how long after the fleet's last decision a report
// decides: a sync period less a tenth. The members' agents sync at the same
// phase of the period, so their reports arrive together once a period, a
// little earlier or later each time as their reads take more or less time.
// Were the whole period required, a report arriving a hair under it after
// the last decision would not decide, nor would the others of its period,
// and the next decision would come two periods after the last. A tenth
// absorbs that spread, so the fleet decides once a period, while the
// reports of one period, which arrive within far less than nine tenths of
// it, still make one decision.
func decidesAfter(sync time.Duration) time.Duration { return sync - sync/syncSlack }

// decide makes the fleet's decision over its members' latest reports in
// st, at now as decision id, and records a rescale as applied, from the
// fleet's total: a member that leaves the pool does not change the total
// (fleet.Decide, Record.From), so a rescale that only moves its share to the others
// records nothing. A member
// whose latest report was read before it had been answered with the last
// split (and that has a share in it) counts that share as its replicas
// (the count its agent is about to write), not the report's. A stored
// report that no longer fits the spec (its metrics changed since) counts
// as no report. When no member can be pooled it changes nothing and
// returns an error matching fleet.ErrNoHealthyMember that names each
// member's reason.
func decide(rec *target.Record, st *state, r *resolved, id string, now time.Time) error {
	var reports []fleet.Report
	for _, sr := range st.reports {
		if !isMember(&r.fleet, sr.member) {
			continue
		}
		rep := &setpointv1.FleetReport{}
		if rep.UnmarshalVT(sr.report) != nil {
			continue
		}
		fr, err := r.report(rep, sr.received, "")
		if err != nil {
			continue
		}
		if sh := st.share(sr.member); sh != nil && sh.Reason != fleet.ShareExcluded && sr.basis.Before(st.splitAt) {
			// The member read what it reported before it had been
			// answered with the last split: its agent applies that share
			// at its next sync, so its count is the share, as one HPA's
			// Scale read after its own write shows the count written.
			// Summing counts read on either side of a split would move a
			// total that did not rescale.
			fr.Scale.Replicas = sh.Replicas
		}
		reports = append(reports, fr)
	}
	in := fleet.Input{Ref: r.ref, Engine: r.in, Fallback: r.fallback, Fleet: r.fleet, Reports: reports}
	fr := fleet.Record{Target: *rec, Members: st.members, Split: st.split, Pool: st.pool}
	if err := fleet.Decide(&fr, in, id, now); err != nil {
		return err
	}
	received := rec.ReceivedSpec
	*rec = fr.Target
	rec.ReceivedSpec = received // target.Decide keeps an input's; a fleet's is its FleetSpec
	st.members, st.split, st.pool, st.splitAt = fr.Members, fr.Split, fr.Pool, rec.Last.At
	if d := rec.Last.Decision; d.Rescale {
		if fr.From == d.DesiredReplicas {
			return nil // the total stays; only the split moved
		}
		o := target.Observation{Kind: target.EventApplied, DecisionID: id, From: fr.From, To: d.DesiredReplicas}
		return target.Observe(rec, o, now)
	}
	return nil
}

// isMember reports whether cluster is a member of s.
func isMember(s *fleet.Spec, cluster string) bool {
	for _, m := range s.Members {
		if m.Name == cluster {
			return true
		}
	}
	return false
}
