// Package slowdisk holds the slow-disk test of the bbolt setpoint-server:
// the real binary keeps its store on a slowfs mount (test/internal/slowfs)
// whose fsync is made to take seconds while callers write and read. A
// disk that stalls its flushes must show up to callers as
// DEADLINE_EXCEEDED at their deadline (or at the server's -call-timeout
// for calls that send none), never as a hang; reads of a target must
// still be served; the store's gauge setpoint_bolt_sync_in_progress_seconds
// must show the stall while it lasts; and once the disk heals, writes
// succeed again and nothing acknowledged is lost. Mounting needs
// /dev/fuse and root (as CI runs): as root a failed mount fails the test,
// otherwise it is skipped. See docs/reliability.md ("Gray failures").
package slowdisk
