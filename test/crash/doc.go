// Package crash holds the crash test of setpoint-server: the real binary,
// under concurrent Recommend and Observe load, is killed with SIGKILL at
// random moments and restarted, again and again; afterwards every
// acknowledged call must be found in the history, the bbolt file must pass
// its consistency check after every kill, and every restart must serve
// again (within acked.Server.Start's 10 s bound; the time it took is
// logged, not checked: how fast a store serves after a start is measured
// by the benchmarks). See docs/reliability.md.
package crash
