// Package fleet decides for one workload that runs in several member
// clusters: one autoscaler spec, one decision over the union of the
// members' latest reports, and the fleet's total split among the members.
//
// A fleet is a target. Its Record holds a target.Record, and Decide makes
// the fleet's decision with target.Decide over the pooled input, so the
// fleet's status, history and last decision are kept, stored and explained
// exactly as any target's, and an autoscaler over the pooled pods decides
// what one Kubernetes HPA over all of those pods would decide.
//
// # Pool
//
// Pool turns the members' reports into one engine.Input: pods and their
// metrics are the union (each pod named "member/pod"), the scale's
// replicas are the sum over the pooled members, and Object and External
// metrics combine by the fleet's rule for each (Sum or Shared). A member
// whose report is older than Spec.StaleAfter, or whose agent says it
// cannot scale, is left out: its pods, metrics and replicas are not in the
// pool.
//
// # Split
//
// Divide splits the total among the pooled members by weight with the
// largest-remainder method, within each member's Min and Max; members of
// weight 0 are standbys that take what the others cannot hold. An
// excluded member's share moves to the pooled ones at the next decision
// (failover); when it returns, it takes its share back no faster than the
// fleet's scale-down policies let the others' shares fall. Every Share
// says how it was reached, as a reason, the exact quota and a sentence.
//
// The package imports the engine, the target package and the standard
// library only; Decide, Pool and Divide are pure.
package fleet
