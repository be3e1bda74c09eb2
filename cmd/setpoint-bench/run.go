package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/setpointhq/setpoint/internal/servertest"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/server/codec"
	"github.com/setpointhq/setpoint/store/boltstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// callTimeout bounds one call.
const callTimeout = 10 * time.Second

// Phase names.
const (
	phaseReal     = "setpoint"
	phaseBaseline = "baseline"
)

// run measures cfg's load against the server (and the baseline), logging
// progress to logw, and returns the report.
func run(ctx context.Context, cfg Config, logw io.Writer) (rep *Report, err error) {
	logf := func(format string, args ...any) { fmt.Fprintf(logw, "setpoint-bench: "+format+"\n", args...) }
	rep = &Report{Command: "setpoint-bench " + cfg.args(), Machine: machine()}
	start := time.Now()
	addr := cfg.Addr
	var real *embedded
	if addr == "" {
		if cfg.Fill > 0 {
			real, rep.Scale, err = fillAndServe(ctx, cfg, logf)
		} else {
			real, err = startEmbedded(cfg.Dir, server.Options{}, boltstore.Options{CheckpointInterval: cfg.CheckpointInterval})
		}
		if err != nil {
			return nil, err
		}
		defer func() {
			if serr := real.stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		addr = real.Addr
	}

	targets := make([]*target, cfg.Targets)
	for j := range targets {
		targets[j] = newTarget(j, cfg, start)
	}
	realConns, err := dialAll(addr, cfg)
	if err != nil {
		return nil, err
	}
	defer closeAll(realConns)

	// The baseline answers with what the server answered, so that both
	// carry the same payloads both ways.
	canned, err := warmUp(ctx, realConns[0], targets[0], cfg)
	if err != nil {
		return nil, fmt.Errorf("first call to the server: %w", err)
	}
	var (
		etcdSrv   *etcdServer
		etcdConns []*grpc.ClientConn
	)
	if cfg.Etcd {
		if etcdSrv, err = startEtcdServer(ctx, cfg, logf); err != nil {
			return nil, err
		}
		defer func() {
			if serr := etcdSrv.stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		if etcdConns, err = dialAll(etcdSrv.addr, cfg); err != nil {
			return nil, err
		}
		defer closeAll(etcdConns)
		if _, err := warmUp(ctx, etcdConns[0], targets[0], cfg); err != nil {
			return nil, fmt.Errorf("first call to the server on etcd: %w", err)
		}
	}
	var baseConns []*grpc.ClientConn
	if cfg.Baseline {
		base, err := startBaseline(canned)
		if err != nil {
			return nil, err
		}
		defer base.stop()
		if baseConns, err = dialAll(base.addr, cfg); err != nil {
			return nil, err
		}
		defer closeAll(baseConns)
	}

	realRes, baseRes, etcdRes := newPhaseResult(phaseReal), newPhaseResult(phaseBaseline), newPhaseResult(phaseEtcd)
	rawRes := newPhaseResult(phaseEtcdRaw)
	var etcdRound float64 // the etcd phase's throughput in this round
	for round := range cfg.Rounds {
		if ctx.Err() != nil {
			break
		}
		var before boltstore.Stats
		if real != nil {
			before = real.Store.Stats()
		}
		stopWriting, err := startRecording(cfg, round, phaseReal)
		if err != nil {
			return nil, err
		}
		logf("round %d/%d: %s", round+1, cfg.Rounds, phaseReal)
		realRes.merge(runPhase(ctx, cfg, realConns, targets))
		stopWriting()
		if real != nil {
			realRes.addStore(before, real.Store.Stats())
		}
		if cfg.Etcd && ctx.Err() == nil {
			logf("round %d/%d: %s", round+1, cfg.Rounds, phaseEtcd)
			stopWriting, err := startRecording(cfg, round, phaseEtcd)
			if err != nil {
				return nil, err
			}
			before, cpu0 := etcdSrv.snapshot(ctx), etcdSrv.membersCPU()
			res := runPhase(ctx, cfg, etcdConns, targets)
			stopWriting()
			res.etcdCPU = etcdSrv.membersCPU() - cpu0
			etcdRound = float64(res.Decisions) / res.Elapsed.Seconds()
			etcdRes.merge(res)
			etcdRes.addEtcd(etcdSrv.where, before, etcdSrv.snapshot(ctx))
		}
		if cfg.Etcd && ctx.Err() == nil {
			// etcd's own ceiling, for values the size of the records the
			// server has stored so far.
			size, n, err := etcdSrv.recordBytes(ctx)
			if err != nil {
				return nil, fmt.Errorf("sizing the raw etcd transactions: %w", err)
			}
			logf("round %d/%d: %s (read and compare-and-put of %d-byte values, the mean of %d records)", round+1, cfg.Rounds, phaseEtcdRaw, size, n)
			res := etcdSrv.runRaw(ctx, cfg, size)
			if res.Decisions > 0 {
				raw := float64(res.Decisions) / res.Elapsed.Seconds()
				rep.EtcdRawRounds = append(rep.EtcdRawRounds, etcdRound/raw)
				logf("round %d/%d: etcd %.0f calls/s, raw %.0f: etcd/raw %.2f", round+1, cfg.Rounds, etcdRound, raw, etcdRound/raw)
			}
			rawRes.merge(res)
			rawRes.addEtcdFigures(res.Etcd)
		}
		if cfg.Baseline && ctx.Err() == nil {
			logf("round %d/%d: %s", round+1, cfg.Rounds, phaseBaseline)
			baseRes.merge(runPhase(ctx, cfg, baseConns, targets))
		}
	}
	realRes.finish()
	rep.Phases = append(rep.Phases, realRes)
	if cfg.Etcd {
		etcdRes.finish()
		rawRes.finish()
		rep.Phases = append(rep.Phases, etcdRes, rawRes)
		if realRes.Throughput > 0 {
			rep.EtcdRatio = etcdRes.Throughput / realRes.Throughput
		}
		if rawRes.Throughput > 0 {
			rep.EtcdRawRatio = etcdRes.Throughput / rawRes.Throughput
		}
	}
	if cfg.Baseline {
		baseRes.finish()
		rep.Phases = append(rep.Phases, baseRes)
		if baseRes.Throughput > 0 {
			rep.Ratio = realRes.Throughput / baseRes.Throughput
		}
	}
	if real != nil {
		if fi, err := os.Stat(real.Store.Path()); err == nil {
			realRes.Store.FileBytes = fi.Size()
		}
		rep.RSS = readRSS()
		if rep.Scale != nil {
			if err := rep.Scale.addUsage(ctx, real.Store); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

// startCPUProfile writes a CPU profile to path until the returned function
// (or pprof.StopCPUProfile) is called.
func startCPUProfile(path string) (func(), error) {
	return startWriting(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace writes an execution trace to path until the returned function
// (or trace.Stop) is called.
func startTrace(path string) (func(), error) {
	return startWriting(path, trace.Start, trace.Stop)
}

// startRecording starts what cfg asks to record of the first phase of
// cfg.RecordPhase (round 0), if phase is that one: its CPU profile, its
// execution trace. The returned function stops both and closes their
// files.
func startRecording(cfg Config, round int, phase string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if round != 0 || phase != cfg.RecordPhase {
		return stop, nil
	}
	for _, r := range []struct {
		path  string
		start func(string) (func(), error)
	}{{cfg.CPUProfile, startCPUProfile}, {cfg.Trace, startTrace}} {
		if r.path == "" {
			continue
		}
		s, err := r.start(r.path)
		if err != nil {
			stop()
			return nil, err
		}
		stops = append(stops, s)
	}
	return stop, nil
}

// startWriting creates path and starts writing it with start; the
// returned function stops and closes the file.
func startWriting(path string, start func(io.Writer) error, stop func()) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { stop(); f.Close() }, nil
}

// dialAll opens one connection per cluster (at most one per caller).
func dialAll(addr string, cfg Config) ([]*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(cfg.Token)))
	}
	conns := make([]*grpc.ClientConn, min(cfg.Clusters, cfg.Concurrency))
	for i := range conns {
		c, err := grpc.NewClient(addr, opts...)
		if err != nil {
			closeAll(conns[:i])
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		conns[i] = c
	}
	return conns, nil
}

func closeAll(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}

// bearer sends a bearer token with every call; the bench dials loopback
// only, in plaintext.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (b bearer) RequireTransportSecurity() bool { return false }

// cannedResponses are the answers the baseline server sends.
type cannedResponses struct {
	recommend *setpointv1.RecommendResponse
	observe   *setpointv1.ObserveResponse
}

// warmUp makes one Recommend and one Observe for t against the server and
// returns its answers.
func warmUp(ctx context.Context, conn *grpc.ClientConn, t *target, cfg Config) (cannedResponses, error) {
	c := setpointv1.NewAutoscalerServiceClient(conn)
	req := t.request(time.Now(), rand.New(rand.NewPCG(0, 0)))
	rr, err := call(ctx, func(ctx context.Context) (*setpointv1.RecommendResponse, error) { return c.Recommend(ctx, req) })
	if err != nil {
		return cannedResponses{}, err
	}
	or, err := call(ctx, func(ctx context.Context) (*setpointv1.ObserveResponse, error) {
		return c.Observe(ctx, observeRequest(req, rr))
	})
	if err != nil {
		return cannedResponses{}, err
	}
	return cannedResponses{recommend: rr, observe: or}, nil
}

// observeRequest reports resp's decision for req as applied.
func observeRequest(req *setpointv1.RecommendRequest, resp *setpointv1.RecommendResponse) *setpointv1.ObserveRequest {
	d := resp.GetDecision()
	return &setpointv1.ObserveRequest{Target: req.GetTarget(), DecisionId: d.GetDecisionId(),
		Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{
			From: req.GetScale().GetReplicas(), To: d.GetDesiredReplicas()}}}
}

// runPhase runs cfg's load once over conns: cfg.Concurrency callers, each
// owning a share of targets, until cfg.Duration has passed, cfg.Requests
// Recommend calls were made, or ctx ends. Calls in flight at the end
// finish and are counted.
func runPhase(ctx context.Context, cfg Config, conns []*grpc.ClientConn, targets []*target) *PhaseResult {
	callers := make([]*caller, cfg.Concurrency)
	for i := range callers {
		callers[i] = &caller{
			client: setpointv1.NewAutoscalerServiceClient(conns[i%len(conns)]),
			rng:    rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano()))),
			cfg:    &cfg,
			errors: map[string]int{},
		}
	}
	for j, t := range targets {
		c := callers[j%len(callers)]
		c.targets = append(c.targets, t)
	}
	var issued atomic.Int64
	cpu0 := cpuTime()
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for _, c := range callers {
		wg.Go(func() { c.run(ctx, deadline, &issued) })
	}
	wg.Wait()
	res := &PhaseResult{Elapsed: time.Since(start), CPU: cpuTime() - cpu0, Errors: map[string]int{}}
	for _, c := range callers {
		res.add(c)
	}
	return res
}

// caller is one agent's loop over the targets it owns; not safe for
// concurrent use.
type caller struct {
	client  setpointv1.AutoscalerServiceClient
	targets []*target
	rng     *rand.Rand
	cfg     *Config

	decisions, rescales, undecided, observes int
	recommend, observe                       []time.Duration
	errors                                   map[string]int
}

// run decides the caller's targets in turn until deadline, ctx ends, or
// issued reaches the configuration's request bound.
func (c *caller) run(ctx context.Context, deadline time.Time, issued *atomic.Int64) {
	for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
		if c.cfg.Requests > 0 && issued.Add(1) > int64(c.cfg.Requests) {
			return
		}
		t := c.targets[i%len(c.targets)]
		req := t.request(time.Now(), c.rng)
		if c.cfg.Fill > 0 {
			req.Target = keyOf(c.rng.IntN(c.cfg.Fill), c.cfg.Clusters)
		}
		begin := time.Now()
		resp, err := call(ctx, func(ctx context.Context) (*setpointv1.RecommendResponse, error) {
			return c.client.Recommend(ctx, req)
		})
		if err != nil {
			c.errors["Recommend "+status.Code(err).String()]++
			continue
		}
		c.recommend = append(c.recommend, time.Since(begin))
		c.decisions++
		d := resp.GetDecision()
		if d.GetRescale() {
			c.rescales++
		}
		if d.GetError() != "" {
			c.undecided++
		}
		if c.cfg.ObserveRatio == 0 || c.rng.Float64() >= c.cfg.ObserveRatio {
			continue
		}
		obs := observeRequest(req, resp)
		begin = time.Now()
		if _, err := call(ctx, func(ctx context.Context) (*setpointv1.ObserveResponse, error) {
			return c.client.Observe(ctx, obs)
		}); err != nil {
			c.errors["Observe "+status.Code(err).String()]++
			continue
		}
		c.observe = append(c.observe, time.Since(begin))
		c.observes++
	}
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// call runs fn with a context bounded by callTimeout.
func call[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return fn(ctx)
}

// embedded is the real server setpoint-bench measures, over a store file
// in dir.
type embedded struct {
	*servertest.Server
	dir  string // removed by stop when temporary
	temp bool
}

// openDir returns dir, or a new temporary directory (temp true) when dir
// is empty.
func openDir(dir string) (string, bool, error) {
	if dir != "" {
		return dir, false, os.MkdirAll(dir, 0o755)
	}
	d, err := os.MkdirTemp("", "setpoint-bench-")
	return d, true, err
}

// startEmbedded starts a server with o over the store file in dir (a
// temporary directory when empty), opened with so, on a loopback port.
// stop releases it.
func startEmbedded(dir string, o server.Options, so boltstore.Options) (*embedded, error) {
	dir, temp, err := openDir(dir)
	if err != nil {
		return nil, err
	}
	srv, err := servertest.Run(servertest.Config{Dir: dir, Options: o, Store: so})
	if err != nil {
		if temp {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	return &embedded{Server: srv, dir: dir, temp: temp}, nil
}

// stop shuts the server down, closes the store and removes a temporary
// directory. Later calls return the first one's error.
func (e *embedded) stop() error {
	errs := []error{e.Stop()}
	if e.temp {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// baseline is the no-op server: the same gRPC service, the same payloads,
// no engine, no store.
type baseline struct {
	addr string
	srv  *grpc.Server
}

// noop implements AutoscalerService by answering the canned responses.
type noop struct {
	setpointv1.UnimplementedAutoscalerServiceServer
	canned cannedResponses
}

func (n *noop) Recommend(context.Context, *setpointv1.RecommendRequest) (*setpointv1.RecommendResponse, error) {
	return n.canned.recommend, nil
}

func (n *noop) Observe(context.Context, *setpointv1.ObserveRequest) (*setpointv1.ObserveResponse, error) {
	return n.canned.observe, nil
}

// startBaseline serves a noop with canned on a loopback port, with the
// gRPC options of the real server that set what the transport costs: its
// message size and stream limits, its stream workers (goroutines kept
// between calls, so that neither pays for growing a fresh goroutine's
// stack) and its decoding (server.DecodeOptions and codec.Registrar: the
// generated decoder and its checks, as the server's, so the baseline pays
// the same to decode).
func startBaseline(canned cannedResponses) (*baseline, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	canned.recommend = proto.Clone(canned.recommend).(*setpointv1.RecommendResponse)
	canned.observe = proto.Clone(canned.observe).(*setpointv1.ObserveResponse)
	opts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(server.DefaultMaxRecvMsgSize), grpc.MaxConcurrentStreams(server.DefaultMaxConcurrentStreams),
		grpc.NumStreamWorkers(server.DefaultStreamWorkers)}, server.DecodeOptions()...)
	srv := grpc.NewServer(opts...)
	setpointv1.RegisterAutoscalerServiceServer(codec.Registrar(srv), &noop{canned: canned})
	go func() { _ = srv.Serve(lis) }()
	return &baseline{addr: lis.Addr().String(), srv: srv}, nil
}

func (b *baseline) stop() { b.srv.Stop() }
