// Package ha holds the fault tests of Setpoint on etcd (issue 14): three
// real setpoint-server processes, built from cmd/setpoint-server, share one
// history on a 3-member etcd cluster on loopback (internal/etcdtest), and
// agents' calls — Recommend, then Observe(applied) of the decision — come
// from several callers, each spreading its calls over the three servers.
//
// TestFaultsUnderLoad kills a server (SIGKILL) and starts it again, kills
// an etcd member and starts it again, and kills the etcd leader, all while
// the load runs; readers read targets meanwhile. Afterwards:
//
//   - every acknowledged Recommend is in its target's history (read from
//     every server) and decision log, and every acknowledged Observe left
//     its Applied event;
//   - each target's history is linearizable: the calls and reads, with
//     their start and end times, are checked with the porcupine checker
//     against a sequential model of one target (model_test.go). A call that
//     failed may or may not have taken effect; one that succeeded must
//     have, once, at one moment between its start and its end, and must
//     have decided from exactly the history before that moment.
//
// TestConcurrentRecommends sends Recommends for one target to two servers
// at the same moment, many times: both are recorded, and every view —
// the history on each server, the Watch feed, the decision log, which
// decision Observe accepts as the last — shows them in one order.
//
// The test in `go test ./...` runs a few seconds of load and one fault of
// each kind; `make chaos` runs minutes of load and many faults
// (-ha.duration). See docs/reliability.md.
package ha
