// Package fleets serves setpoint.v1.FleetService: fleets, one autoscaler
// over a workload that runs in several member clusters (package fleet
// decides; docs/fleets.md explains the model).
//
// # Where a fleet lives
//
// A fleet is stored as a target.Record under the reserved key
// {Cluster: "@fleet", Namespace: <fleet namespace>, Name: <fleet name>}
// (Cluster; the autoscaler methods refuse clusters that start with "@", so
// no agent can write one). Its Ref, Spec and Settings are the fleet's
// autoscaler resolved by package convert, the one resolver Recommend uses;
// its ReceivedSpec is the setpoint.v1.FleetSpec as put, in wire form; its
// status, history and last decision are the fleet's own, durable like any
// target's. Record.Fleet holds a marshalled setpoint.storage.v1.FleetState:
// every member's latest report as received (wire form, with the server
// time it arrived), each member's fleet.MemberState, the last split and the
// last pool. So every server of an HA service decides on the same reports.
//
// # When the fleet decides
//
// Report is one store.Update of the fleet's record: the member's report is
// stored, and when the fleet has no decision yet or its last one is at
// least nine tenths of a sync period old (the members' reports of one
// period arrive a little earlier or later each time), fleet.Decide decides
// over every member's latest report; a rescale is recorded with
// target.Observe (applied, from → to) in the same update: the service
// applies a total by splitting it. The answer is the member's share in the
// (new or last) split.
//
// # Who may do what
//
// The admission policy (server/admission) lets a cluster's agent call
// Report only for its own member and GetFleet; PutFleet and DeleteFleet
// only admins and platform principals. The handlers then check the stored
// spec: a platform principal must be able to read every member cluster (of
// the spec put and of the spec stored), a cluster identity's cluster must be
// a member. A refusal is admission.ErrPermissionDenied whether or not the
// fleet exists.
package fleets
