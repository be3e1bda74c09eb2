package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store/etcdstore"
)

// phaseEtcd names the phases against the server on etcd.
const phaseEtcd = "etcd"

// etcdServer is a server on the etcd store, in this process, over a
// cluster this process started (or endpoints it was given).
type etcdServer struct {
	addr      string
	cluster   *etcdtest.Cluster // nil on given endpoints
	dir       string            // the cluster's, removed by stop
	cli       *clientv3.Client
	st        *etcdstore.Store
	cancel    context.CancelFunc
	served    chan error
	counts    etcdCounts
	where     string
	endpoints []string
	prefix    string // the store's keys, and the raw phases' under it
}

// etcdCounts counts the store's etcd requests.
type etcdCounts struct {
	reads, commits, conflicts, other atomic.Uint64
	commitTime                       atomic.Int64 // ns, sum over commits
}

func (c *etcdCounts) observe(op string, d time.Duration, conflict bool) {
	switch op {
	case "read":
		c.reads.Add(1)
	case "commit":
		c.commits.Add(1)
		c.commitTime.Add(int64(d))
	default:
		c.other.Add(1)
	}
	if conflict {
		c.conflicts.Add(1)
	}
}

// snapshot returns the counters' values and the bytes the members have
// written to their write-ahead logs.
func (e *etcdServer) snapshot(ctx context.Context) EtcdFigures {
	c := &e.counts
	return EtcdFigures{Reads: c.reads.Load(), Commits: c.commits.Load(), Conflicts: c.conflicts.Load(),
		Other: c.other.Load(), commitTime: time.Duration(c.commitTime.Load()), walBytes: e.walBytes(ctx)}
}

// walBytes sums etcd_disk_wal_write_bytes_total over the members' /metrics;
// a member that does not answer counts 0.
func (e *etcdServer) walBytes(ctx context.Context) float64 {
	var sum float64
	for _, ep := range e.endpoints {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/metrics", nil)
		if err != nil {
			continue
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "etcd_disk_wal_write_bytes_total "); ok {
				var f float64
				if _, err := fmt.Sscan(v, &f); err == nil {
					sum += f
				}
			}
		}
		resp.Body.Close()
	}
	return sum
}

// startEtcdServer starts cfg's etcd cluster (unless cfg gives endpoints)
// and a server on it, on a loopback port, under a fresh prefix.
func startEtcdServer(ctx context.Context, cfg Config, logf func(string, ...any)) (e *etcdServer, err error) {
	// Every `return nil, err` below sets e to nil before this runs: the
	// cleanup works on the value made here.
	made := &etcdServer{served: make(chan error, 1)}
	e = made
	defer func() {
		if err != nil {
			if serr := made.stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("cleaning up: %w", serr))
			}
			e = nil
		}
	}()
	endpoints := strings.Split(cfg.EtcdEndpoints, ",")
	if cfg.EtcdEndpoints == "" {
		bin := cfg.EtcdBinary
		if bin == "" {
			logf("finding the etcd binary (make kube-binaries; the first build takes minutes)")
			if bin, err = kubetest.EtcdBinary(ctx); err != nil {
				return nil, fmt.Errorf("cannot start an etcd cluster: no etcd binary (run `make kube-binaries` in the checkout, or give -etcd-binary or -etcd-endpoints): %w", err)
			}
		}
		if e.dir, err = os.MkdirTemp("", "setpoint-bench-etcd-"); err != nil {
			return nil, err
		}
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if e.cluster, err = etcdtest.Launch(lctx, etcdtest.LaunchOptions{Binary: bin, Dir: e.dir, Members: cfg.EtcdMembers, NoFsync: cfg.EtcdNoFsync}); err != nil {
			return nil, fmt.Errorf("cannot start a %d-member etcd cluster from %s: %w", cfg.EtcdMembers, bin, err)
		}
		endpoints = e.cluster.Endpoints
		fsync := "fsync on"
		if cfg.EtcdNoFsync {
			fsync = "fsync off"
		}
		e.where = fmt.Sprintf("%d-member etcd cluster on loopback (%s)", cfg.EtcdMembers, fsync)
	} else {
		e.where = "etcd at " + cfg.EtcdEndpoints
	}
	e.endpoints = endpoints
	logf("server on %s", e.where)
	if e.cli, err = clientv3.New(etcdstore.ClientConfig(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second})); err != nil {
		return nil, fmt.Errorf("cannot connect to etcd at %v: %w", endpoints, err)
	}
	e.prefix = fmt.Sprintf("/setpoint-bench-%d/", time.Now().UnixNano())
	if e.st, err = etcdstore.New(ctx, e.cli, etcdstore.Options{Prefix: e.prefix, Observe: e.counts.observe}); err != nil {
		return nil, err
	}
	srv, err := server.New(e.st, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.addr = lis.Addr().String()
	sctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.served <- srv.Serve(sctx, lis) }()
	return e, nil
}

// stop shuts the server down and releases the store, the client, the
// cluster and its directory.
func (e *etcdServer) stop() error {
	var errs []error
	if e.cancel != nil {
		e.cancel()
		errs = append(errs, <-e.served)
	}
	if e.st != nil {
		errs = append(errs, e.st.Close())
	}
	if e.cli != nil {
		errs = append(errs, e.cli.Close())
	}
	if e.cluster != nil {
		e.cluster.Stop()
	}
	if e.dir != "" {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// EtcdFigures are the etcd store's requests during the etcd phases.
type EtcdFigures struct {
	// Where describes the cluster.
	Where string `json:"where"`
	// WALBytesPerCall is the bytes the members wrote to their write-ahead
	// logs (all members together) per successful call: what one decision
	// costs in raft log.
	WALBytesPerCall float64 `json:"wal_bytes_per_call"`
	// Reads are the record reads before a transaction (a cache miss),
	// Commits the transactions, Conflicts those that lost a race for
	// their target and were retried, Other every other request.
	Reads     uint64 `json:"reads"`
	Commits   uint64 `json:"commits"`
	Conflicts uint64 `json:"conflicts"`
	Other     uint64 `json:"other"`
	// RequestsPerDecision is all requests per successful Recommend and
	// Observe; CommitMs the mean time of a transaction, in ms.
	RequestsPerDecision float64 `json:"requests_per_call"`
	CommitMs            float64 `json:"commit_mean_ms"`
	// ValueBytes is the size of the values the raw phases write: the mean
	// size of the records the server on etcd stored (the last round's).
	ValueBytes int `json:"value_bytes,omitempty"`

	commitTime time.Duration
	walBytes   float64
}

// addEtcd adds the store's counters between before and after.
func (r *PhaseResult) addEtcd(where string, before, after EtcdFigures) {
	if r.Etcd == nil {
		r.Etcd = &EtcdFigures{Where: where}
	}
	r.Etcd.Reads += after.Reads - before.Reads
	r.Etcd.Commits += after.Commits - before.Commits
	r.Etcd.Conflicts += after.Conflicts - before.Conflicts
	r.Etcd.Other += after.Other - before.Other
	r.Etcd.commitTime += after.commitTime - before.commitTime
	r.Etcd.walBytes += after.walBytes - before.walBytes
}

// addEtcdFigures adds f's counts to r's.
func (r *PhaseResult) addEtcdFigures(f *EtcdFigures) {
	if r.Etcd == nil {
		r.Etcd = &EtcdFigures{Where: f.Where}
	}
	r.Etcd.Reads += f.Reads
	r.Etcd.Commits += f.Commits
	r.Etcd.Conflicts += f.Conflicts
	r.Etcd.Other += f.Other
	r.Etcd.commitTime += f.commitTime
	r.Etcd.walBytes += f.walBytes
	r.Etcd.ValueBytes = f.ValueBytes
}

// finish computes the per-call figures.
func (f *EtcdFigures) finish(calls int) {
	if calls > 0 {
		f.RequestsPerDecision = float64(f.Reads+f.Commits+f.Other) / float64(calls)
		f.WALBytesPerCall = f.walBytes / float64(calls)
	}
	if f.Commits > 0 {
		f.CommitMs = ms(f.commitTime / time.Duration(f.Commits))
	}
}

// membersCPU returns the CPU time (user+sys) the launched members have
// used; 0 on given endpoints.
func (e *etcdServer) membersCPU() time.Duration {
	if e.cluster == nil {
		return 0
	}
	var sum time.Duration
	for _, pid := range e.cluster.Pids() {
		sum += processCPU(pid)
	}
	return sum
}

// processCPU returns the user+sys CPU time of process pid from
// /proc/pid/stat; 0 when it cannot be read.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: state is field 3,
	// utime 14 and stime 15 (in clock ticks, 100 per second on Linux).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * (time.Second / 100)
}
