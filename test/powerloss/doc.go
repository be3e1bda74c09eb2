// Package powerloss holds the power-loss test of setpoint-server: the real
// binary keeps its bbolt file on lazyfs, a FUSE filesystem served by the
// test that keeps what was written since the last fsync in memory apart;
// under concurrent Recommend and Observe load the test cuts power again and
// again (kills the process, drops every unsynced write, remounts) and
// restarts the server. Afterwards every acknowledged call must be in the
// history and the file must pass bbolt's consistency check after every
// cut. See docs/reliability.md.
package powerloss
