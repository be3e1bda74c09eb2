package fleets

import (
	"fmt"
	"slices"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/fleet"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// state is a fleet's state besides its target record, decoded from
// target.Record.Fleet (a marshalled storage FleetState).
type state struct {
	// reports are the members' latest reports, in the order the members
	// first reported.
	reports []storedReport
	// members, split and pool are package fleet's Record fields.
	members []fleet.MemberState
	split   *fleet.Split
	pool    []fleet.PoolMember
	// splitAt is the time of the decision the split was made for.
	splitAt time.Time
}

// storedReport is one member's latest report as stored.
type storedReport struct {
	member   string
	received time.Time
	// report is the setpoint.v1.FleetReport in wire form.
	report []byte
	// basis is the time of the split the member had been answered with
	// when it sent the report (zero: none): its replicas show that split.
	basis time.Time
	// answered is the time of the split the report was answered with.
	answered time.Time
}

// decodeState reads a record's fleet state; the zero state when empty.
func decodeState(rec *target.Record) (state, error) {
	var st state
	if rec.Fleet == "" {
		return st, nil
	}
	var m pb.FleetState
	if err := m.UnmarshalVT([]byte(rec.Fleet)); err != nil {
		return st, fmt.Errorf("fleets: %s: fleet state: %w", rec.Key, err)
	}
	for _, r := range m.GetReports() {
		st.reports = append(st.reports, storedReport{member: r.GetMember(), received: timeOf(r.GetReceived()), report: r.GetReport(),
			basis: timeOf(r.GetBasis()), answered: timeOf(r.GetAnswered())})
	}
	for _, ms := range m.GetMembers() {
		s := fleet.MemberState{Name: ms.GetName(), Pooled: ms.GetPooled(), Share: ms.GetShare(), Returning: ms.GetReturning()}
		for _, d := range ms.GetDecreases() {
			s.Decreases = append(s.Decreases, engine.ScaleEvent{Change: d.GetChange(), At: timeOf(d.GetAt()), Outdated: d.GetOutdated()})
		}
		st.members = append(st.members, s)
	}
	if sp := m.GetSplit(); sp != nil {
		st.split = &fleet.Split{Total: sp.GetTotal(), Placed: sp.GetPlaced(), Message: sp.GetMessage()}
		st.splitAt = timeOf(sp.GetTime())
		for _, sh := range sp.GetShares() {
			st.split.Shares = append(st.split.Shares, fleet.Share{
				Member: sh.GetMember(), Replicas: sh.GetReplicas(), Weighted: sh.GetWeighted(), Reason: fleet.ShareReason(sh.GetReason()),
				QuotaNum: sh.GetQuotaNum(), QuotaDen: sh.GetQuotaDen(), Remainder: sh.GetRemainder(),
				Exclusion: fleet.Exclusion(sh.GetExclusion()), Message: sh.GetMessage(),
			})
		}
	}
	for _, p := range m.GetPool() {
		st.pool = append(st.pool, fleet.PoolMember{
			Name: p.GetName(), Exclusion: fleet.Exclusion(p.GetExclusion()), Age: p.GetAge().AsDuration(),
			Replicas: p.GetReplicas(), Pods: int(p.GetPods()), Message: p.GetMessage(),
		})
	}
	return st, nil
}

// encode returns the state as target.Record.Fleet keeps it.
func (st *state) encode() (string, error) {
	m := &pb.FleetState{}
	for _, r := range st.reports {
		m.Reports = append(m.Reports, &pb.FleetMemberReport{Member: r.member, Received: timestamp(r.received), Report: r.report,
			Basis: timestamp(r.basis), Answered: timestamp(r.answered)})
	}
	for _, ms := range st.members {
		s := &pb.FleetMemberState{Name: ms.Name, Pooled: ms.Pooled, Share: ms.Share, Returning: ms.Returning}
		for _, d := range ms.Decreases {
			s.Decreases = append(s.Decreases, &pb.ScaleEvent{Change: d.Change, At: timestamp(d.At), Outdated: d.Outdated})
		}
		m.Members = append(m.Members, s)
	}
	if sp := st.split; sp != nil {
		out := &pb.FleetSplit{Total: sp.Total, Placed: sp.Placed, Message: sp.Message, Time: timestamp(st.splitAt)}
		for _, sh := range sp.Shares {
			out.Shares = append(out.Shares, &pb.FleetShare{
				Member: sh.Member, Replicas: sh.Replicas, Weighted: sh.Weighted, Reason: string(sh.Reason),
				QuotaNum: sh.QuotaNum, QuotaDen: sh.QuotaDen, Remainder: sh.Remainder,
				Exclusion: string(sh.Exclusion), Message: sh.Message,
			})
		}
		m.Split = out
	}
	for _, p := range st.pool {
		m.Pool = append(m.Pool, &pb.FleetPoolMember{
			Name: p.Name, Exclusion: string(p.Exclusion), Age: durationpb.New(p.Age),
			Replicas: p.Replicas, Pods: int32(min(p.Pods, 1<<31-1)), Message: p.Message,
		})
	}
	b, err := m.MarshalVT()
	return string(b), err
}

// report returns member's stored report; nil without one.
func (st *state) report(member string) *storedReport {
	i := slices.IndexFunc(st.reports, func(r storedReport) bool { return r.member == member })
	if i < 0 {
		return nil
	}
	return &st.reports[i]
}

// setReport stores rep as member's latest report, received at.
func (st *state) setReport(rep *setpointv1.FleetReport, at time.Time) error {
	b, err := rep.MarshalVT()
	if err != nil {
		return err
	}
	if r := st.report(rep.GetMember()); r != nil {
		// The member applied the split its previous report was answered
		// with before it read what this report says.
		r.received, r.report, r.basis = at, b, r.answered
		return nil
	}
	st.reports = append(st.reports, storedReport{member: rep.GetMember(), received: at, report: b})
	return nil
}

// keepMembers forgets the reports and states of clusters that are not
// members of s.
func (st *state) keepMembers(s *fleet.Spec) {
	st.reports = slices.DeleteFunc(st.reports, func(r storedReport) bool { return !isMember(s, r.member) })
	st.members = slices.DeleteFunc(st.members, func(m fleet.MemberState) bool { return !isMember(s, m.Name) })
}

// share returns member's share in the last split; nil without one.
func (st *state) share(member string) *fleet.Share {
	if st.split == nil {
		return nil
	}
	for i := range st.split.Shares {
		if st.split.Shares[i].Member == member {
			return &st.split.Shares[i]
		}
	}
	return nil
}

// timestamp is t as a Timestamp; nil for the zero time.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// timeOf is a Timestamp as a time in UTC; the zero time for nil.
func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// answer marks member's latest report as answered with the last split.
func (st *state) answer(member string) {
	if r := st.report(member); r != nil {
		r.answered = st.splitAt
	}
}

// answerAll marks every member's latest report as answered with the last
// split: in a simulation every member applies every split.
func (st *state) answerAll() {
	for i := range st.reports {
		st.reports[i].answered = st.splitAt
	}
}
