// Package ha holds the fault tests of Setpoint on etcd (issue 14): three
// real setpoint-server processes, built from cmd/setpoint-server with the
// testclock tag, share one history on a 3-member etcd cluster on loopback
// (internal/etcdtest), and agents' calls — Recommend, then
// Observe(applied) of the decision — come from several callers, each
// spreading its calls over the three servers. The servers' clocks
// disagree (-ha.skew: one behind the test's, one ahead; the binary's
// SETPOINT_TEST_CLOCK_OFFSET), and each reaches etcd through its own TCP
// proxies (etcdtest.Link), which the test can cut.
//
// TestFaultsUnderLoad kills a server (SIGKILL) and starts it again, kills
// an etcd member and starts it again, kills the etcd leader, and
// partitions a server from etcd (its proxies hold every byte, closing
// nothing) and heals it, all while the load runs; readers read targets
// meanwhile. Afterwards:
//
//   - every acknowledged Recommend is in its target's history (read from
//     every server) and decision log, and every acknowledged Observe left
//     its Applied event;
//   - each target's history is linearizable: the calls and reads, with
//     their start and end times, are checked with the porcupine checker
//     against a sequential model of one target (model_test.go). A call that
//     failed may or may not have taken effect; one that succeeded must
//     have, once, at one moment between its start and its end, and must
//     have decided from exactly the history before that moment;
//   - decisions are stamped in the order they were recorded (the history
//     and the decision log agree, times strictly increasing), never before
//     their server's clock nor after the fastest one's;
//   - a partitioned server answered no call it began while cut off, said
//     NOT_SERVING within a bound, and SERVING again once healed.
//
// It also injects gray failures (gray_test.go): an etcd member or the
// leader paused with SIGSTOP, an etcd member blackholed or delayed by its
// proxies on every server's link, the disk of one member (its data on
// test/internal/slowfs, the one member with fsync on) made slow while it
// leads and while it follows, a server paused; during each member
// fault every server must acknowledge calls and the longest time without
// an acknowledged call is bounded. Meanwhile Watch streams resume across
// servers (none may answer OUT_OF_RANGE) and a client of every server
// follows the feed without its stream ending.
//
// TestConcurrentRecommends sends Recommends for one target to two servers
// at the same moment, many times: both are recorded, and every view —
// the history on each server, the Watch feed, the decision log, which
// decision Observe accepts as the last — shows them in one order.
//
// TestClockSkew runs the servers 30 s apart and shows what skew does to a
// target: its clock is the fastest that wrote it, its stabilization window
// is measured on that clock, and its decisions keep their order.
//
// The test in `go test ./...` runs a few seconds of load and one fault of
// each kind; `make chaos` runs minutes of load and many faults
// (-ha.duration). The slow disk needs /dev/fuse and root (as CI runs);
// as root a failed mount fails the test, otherwise the test says it runs
// without that fault. See docs/reliability.md.
package ha
