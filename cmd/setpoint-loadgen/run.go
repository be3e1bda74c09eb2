package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"google.golang.org/grpc/status"
)

// callTimeout bounds one call.
const callTimeout = 10 * time.Second

// run plays cfg's load until cfg.Duration has passed or ctx ends, and
// returns what it measured. Calls already in flight at the end finish and
// are counted.
func run(ctx context.Context, cfg Config) (res *Result, err error) {
	res = &Result{Errors: map[string]int{}}
	addr := cfg.Addr
	if cfg.Embedded {
		e, err := startEmbedded()
		if err != nil {
			return nil, err
		}
		defer func() {
			res.RSS = readRSS()
			st := e.store.Stats()
			res.Store = &st
			if fi, err := os.Stat(e.store.Path()); err == nil {
				res.StoreBytes = fi.Size()
			}
			if serr := e.stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		addr = e.addr
	}

	conns := make([]*setpointclient.Client, min(cfg.Clusters, cfg.Concurrency))
	for i := range conns {
		c, err := setpointclient.Dial(addr, setpointclient.Options{Token: cfg.Token})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conns[i] = c
	}

	cpu0 := cpuTime()
	start := time.Now()
	callers := make([]*caller, cfg.Concurrency)
	for i := range callers {
		callers[i] = &caller{
			client: conns[i%len(conns)],
			rng:    rand.New(rand.NewPCG(uint64(i), 0x5e7)),
			ratio:  cfg.ObserveRatio,
			errors: map[string]int{},
		}
	}
	for j := range cfg.Targets {
		c := callers[j%len(callers)]
		c.targets = append(c.targets, newTarget(j, cfg, start))
	}

	deadline := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for _, c := range callers {
		wg.Go(func() { c.run(ctx, deadline) })
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.CPU = cpuTime() - cpu0
	for _, c := range callers {
		res.add(c)
	}
	res.sort()
	return res, nil
}

// caller is one agent's loop over the targets it owns; not safe for
// concurrent use.
type caller struct {
	client  setpointv1.AutoscalerServiceClient
	targets []*target
	rng     *rand.Rand
	ratio   float64

	decisions, rescales, undecided, observes int
	recommend, observe                       []time.Duration
	errors                                   map[string]int
}

// run decides the caller's targets in turn until deadline or ctx ends.
func (c *caller) run(ctx context.Context, deadline time.Time) {
	for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
		t := c.targets[i%len(c.targets)]
		req := t.request(time.Now(), c.rng)
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
		if c.rng.Float64() >= c.ratio {
			continue
		}
		obs := &setpointv1.ObserveRequest{Target: req.GetTarget(), DecisionId: d.GetDecisionId(),
			Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{
				From: req.GetScale().GetReplicas(), To: d.GetDesiredReplicas()}}}
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

// embedded is an in-process server over a bbolt file in a temporary
// directory.
type embedded struct {
	addr   string
	store  *store.Bolt
	dir    string
	cancel context.CancelFunc
	served chan error
}

// startEmbedded starts a server on a loopback port. stop releases it and
// removes its directory.
func startEmbedded() (*embedded, error) {
	dir, err := os.MkdirTemp("", "setpoint-loadgen-")
	if err != nil {
		return nil, err
	}
	st, err := store.Open(filepath.Join(dir, "setpoint.db"), store.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	srv := server.New(st, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	e := &embedded{addr: lis.Addr().String(), store: st, dir: dir, cancel: cancel, served: make(chan error, 1)}
	go func() { e.served <- srv.Serve(ctx, lis) }()
	return e, nil
}

// stop shuts the server down, closes the store and removes the directory.
func (e *embedded) stop() error {
	e.cancel()
	var errs []error
	if err := <-e.served; err != nil {
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	errs = append(errs, e.store.Close(), os.RemoveAll(e.dir))
	return errors.Join(errs...)
}
