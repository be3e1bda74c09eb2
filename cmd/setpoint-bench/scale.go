package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/setpointhq/setpoint/internal/servertest"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/store/boltstore"
	tgt "github.com/setpointhq/setpoint/target"
)

// seedSteps and seedEvery make the template record: a target decided every
// 15 s for ten minutes has every history window at its steady state.
const (
	seedSteps = 40
	seedEvery = 15 * time.Second
	// fillWorkers is how many Updates the fill keeps in flight, so that
	// commits carry many records each.
	fillWorkers = 512
)

// ScaleResult is what scale mode measured.
type ScaleResult struct {
	// Targets is the number of targets in the store.
	Targets int `json:"targets"`
	// Reused says the store file was already filled by an earlier run
	// (-dir) and not written again.
	Reused bool `json:"reused"`
	// FillSeconds is how long filling took.
	FillSeconds float64 `json:"fill_seconds"`
	// HistoryEntriesPerTarget counts the template record's history
	// entries (recommendations and scale events).
	HistoryEntriesPerTarget int `json:"history_entries_per_target"`
	// FileBytes is the store file's size after filling.
	FileBytes int64 `json:"file_bytes"`
	// BytesPerTarget and BytesPerHistoryEntry divide FileBytes: the whole
	// file, everything a record holds besides its history included.
	BytesPerTarget       float64 `json:"bytes_per_target"`
	BytesPerHistoryEntry float64 `json:"bytes_per_history_entry"`
	// Usage is what the file holds, by bucket, once serving.
	Usage boltstore.Usage `json:"usage"`
	// RecordBytesPerTarget and RecordBytesPerHistoryEntry divide the bytes
	// the records bucket uses (keys, values, page headers; not the free
	// space of its pages, the expiry index or the change feed).
	RecordBytesPerTarget       float64 `json:"record_bytes_per_target"`
	RecordBytesPerHistoryEntry float64 `json:"record_bytes_per_history_entry"`
	// LogBytesPerDecision and LogBytesPerTarget divide the bytes the
	// decision log's bucket uses by its entries and by the targets.
	LogBytesPerDecision float64 `json:"log_bytes_per_decision"`
	LogBytesPerTarget   float64 `json:"log_bytes_per_target"`
	// OpenSeconds is how long boltstore.Open took; ServingSeconds the time from
	// the start of Open to the first answered Recommend over gRPC.
	OpenSeconds    float64 `json:"open_seconds"`
	ServingSeconds float64 `json:"serving_seconds"`
	// Before and Serving are this process's memory before opening the store
	// and after its first answer; IdleBytesPerTarget is the growth of RSS
	// (anonymous and mapped file) divided by Targets.
	Before             *RSS    `json:"rss_before_open"`
	Serving            *RSS    `json:"rss_serving"`
	IdleBytesPerTarget float64 `json:"idle_bytes_per_target"`
}

func (s *ScaleResult) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nscale: %d targets of %d history entries each", s.Targets, s.HistoryEntriesPerTarget)
	if s.Reused {
		b.WriteString(" (file reused)")
	} else {
		fmt.Fprintf(&b, ", filled in %.1f s", s.FillSeconds)
	}
	fmt.Fprintf(&b, "\nfile %.1f MiB: %.0f bytes per target, %.1f bytes per history entry\n", mib(s.FileBytes), s.BytesPerTarget, s.BytesPerHistoryEntry)
	u := s.Usage
	fmt.Fprintf(&b, "records bucket %.1f MiB in use (%.1f allocated): %.0f bytes per target, %.1f bytes per history entry; expiry index %.1f MiB, change feed %.1f MiB (%d changes); %d free pages\n",
		mib(int64(u.Records.InUse)), mib(int64(u.Records.Allocated)), s.RecordBytesPerTarget, s.RecordBytesPerHistoryEntry,
		mib(int64(u.LastSeen.InUse)), mib(int64(u.Changes.InUse)), u.Changes.Keys, u.FreePages)
	fmt.Fprintf(&b, "decision log %.1f MiB in use (%.1f allocated), %d decisions: %.1f bytes per decision, %.0f bytes per target\n",
		mib(int64(u.Decisions.InUse)), mib(int64(u.Decisions.Allocated)), u.Decisions.Keys, s.LogBytesPerDecision, s.LogBytesPerTarget)
	fmt.Fprintf(&b, "open %.3f s; start to first Recommend answered %.3f s\n", s.OpenSeconds, s.ServingSeconds)
	if s.Before != nil && s.Serving != nil {
		fmt.Fprintf(&b, "RSS before open %.0f MiB (anon %.0f), serving %.0f MiB (anon %.0f, files %.0f): %.1f bytes per idle target\n",
			mib(s.Before.Current), mib(s.Before.Anon), mib(s.Serving.Current), mib(s.Serving.Anon), mib(s.Serving.File), s.IdleBytesPerTarget)
	}
	return b.String()
}

// fillAndServe fills the store file in cfg.Dir (a temporary directory
// when empty) with cfg.Fill targets, closes it, and measures opening it
// again and serving the first Recommend.
func fillAndServe(ctx context.Context, cfg Config, logf func(string, ...any)) (*embedded, *ScaleResult, error) {
	dir, temp, err := openDir(cfg.Dir)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {
		if temp {
			os.RemoveAll(dir)
		}
	}
	path := filepath.Join(dir, "setpoint.db")
	res := &ScaleResult{Targets: cfg.Fill}

	logf("seeding the template record: %d decisions %s apart", seedSteps, seedEvery)
	tmpl, err := seedRecord(ctx, cfg)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("seed: %w", err)
	}
	h := tmpl.History
	res.HistoryEntriesPerTarget = len(h.Recommendations) + len(h.ScaleUpEvents) + len(h.ScaleDownEvents)

	if _, err := os.Stat(path); err == nil && !temp {
		res.Reused = true
		logf("reusing %s (filled by an earlier run with -fill %d, it is assumed)", path, cfg.Fill)
	} else {
		begin := time.Now()
		if err := fill(ctx, path, tmpl, cfg, logf); err != nil {
			cleanup()
			return nil, nil, err
		}
		res.FillSeconds = time.Since(begin).Seconds()
	}
	fi, err := os.Stat(path)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	res.FileBytes = fi.Size()
	res.BytesPerTarget = float64(res.FileBytes) / float64(cfg.Fill)
	res.BytesPerHistoryEntry = res.BytesPerTarget / float64(max(res.HistoryEntriesPerTarget, 1))

	tmpl = tgt.Record{}
	runtime.GC()
	debug.FreeOSMemory()
	res.Before = readRSS()
	logf("opening %s (%.0f MiB) and serving", path, mib(res.FileBytes))
	begin := time.Now()
	st, err := boltstore.Open(path, boltstore.Options{CheckpointInterval: cfg.CheckpointInterval})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	res.OpenSeconds = time.Since(begin).Seconds()
	srv, err := servertest.Run(servertest.Config{Open: st})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	e := &embedded{Server: srv, dir: dir, temp: temp}
	conns, err := dialAll(e.Addr, Config{Clusters: 1, Concurrency: 1})
	if err != nil {
		e.stop()
		return nil, nil, err
	}
	defer closeAll(conns)
	t := newTarget(0, cfg, time.Now())
	req := t.request(time.Now(), rand.New(rand.NewPCG(1, 1)))
	req.Target = keyOf(cfg.Fill/2, cfg.Clusters)
	c := setpointv1.NewAutoscalerServiceClient(conns[0])
	for {
		_, err := call(ctx, func(ctx context.Context) (*setpointv1.RecommendResponse, error) { return c.Recommend(ctx, req) })
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Since(begin) > time.Minute {
			e.stop()
			return nil, nil, fmt.Errorf("first Recommend: %w", err)
		}
		time.Sleep(time.Millisecond)
	}
	res.ServingSeconds = time.Since(begin).Seconds()
	res.Serving = readRSS()
	if res.Before != nil && res.Serving != nil {
		res.IdleBytesPerTarget = float64(res.Serving.Current-res.Before.Current) / float64(cfg.Fill)
	}
	return e, res, nil
}

// addUsage walks st's file for the space each bucket takes. It reads every
// page, so it runs after every other measurement.
func (s *ScaleResult) addUsage(ctx context.Context, st *boltstore.Store) error {
	u, err := st.Usage(ctx)
	if err != nil {
		return err
	}
	s.Usage = u
	s.RecordBytesPerTarget = float64(u.Records.InUse) / float64(max(u.Records.Keys, 1))
	s.RecordBytesPerHistoryEntry = s.RecordBytesPerTarget / float64(max(s.HistoryEntriesPerTarget, 1))
	s.LogBytesPerDecision = float64(u.Decisions.InUse) / float64(max(u.Decisions.Keys, 1))
	s.LogBytesPerTarget = float64(u.Decisions.InUse) / float64(max(s.Targets, 1))
	return nil
}

// seedRecord returns the record of target 0 after seedSteps decisions
// seedEvery apart (each rescale observed as applied), made through a real
// server with a stepped clock that ends now.
func seedRecord(ctx context.Context, cfg Config) (tgt.Record, error) {
	return seedRecordOf(ctx, cfg, 0, 2)
}

// seedRecordOf is seedRecord for target j of the workload, its load drawn
// with seed.
func seedRecordOf(ctx context.Context, cfg Config, j int, seed uint64) (tgt.Record, error) {
	t0 := time.Now().Add(-seedSteps * seedEvery)
	var step atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(step.Load()) * seedEvery) }
	e, err := startEmbedded("", server.Options{Now: now}, boltstore.Options{})
	if err != nil {
		return tgt.Record{}, err
	}
	defer e.stop()
	conns, err := dialAll(e.Addr, Config{Clusters: 1, Concurrency: 1})
	if err != nil {
		return tgt.Record{}, err
	}
	defer closeAll(conns)
	c := setpointv1.NewAutoscalerServiceClient(conns[0])
	tg := newTarget(j, cfg, t0)
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range seedSteps {
		step.Store(int64(i))
		req := tg.request(now(), rng)
		resp, err := c.Recommend(ctx, req)
		if err != nil {
			return tgt.Record{}, err
		}
		if resp.GetDecision().GetRescale() {
			if _, err := c.Observe(ctx, observeRequest(req, resp)); err != nil {
				return tgt.Record{}, err
			}
			tg.req.Scale.Replicas = resp.GetDecision().GetDesiredReplicas()
		}
	}
	return e.Store.Get(ctx, convert.Key(tg.req.GetTarget()))
}

// fill writes cfg.Fill copies of tmpl, keyed as keyOf says, into a new
// store at path, in key order with many writes per commit.
func fill(ctx context.Context, path string, tmpl tgt.Record, cfg Config, logf func(string, ...any)) error {
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		return err
	}
	keys := make(chan int, fillWorkers)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		done     atomic.Int64
	)
	for range fillWorkers {
		wg.Go(func() {
			for j := range keys {
				key := convert.Key(keyOf(j, cfg.Clusters))
				var err error
				for i := range cfg.FillDecisions {
					// Each write a decision of its own, 15 s after the
					// previous one, ending at the template's.
					last := *tmpl.Last
					last.ID = fmt.Sprintf("%s-%d", last.ID, i)
					last.At = last.At.Add(-time.Duration(cfg.FillDecisions-1-i) * seedEvery)
					_, err = st.Update(ctx, key, func(rec *tgt.Record) error {
						*rec = tmpl // shared slices are only read: the store encodes rec
						rec.Key, rec.Last = key, &last
						return nil
					})
					if err != nil {
						break
					}
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
				}
				if n := done.Add(1); n%100_000 == 0 {
					logf("filled %d of %d targets", n, cfg.Fill)
				}
			}
		})
	}
	for j := 0; j < cfg.Fill && ctx.Err() == nil; j++ {
		keys <- j
	}
	close(keys)
	wg.Wait()
	if err := st.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}
