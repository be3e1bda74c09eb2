package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"
)

// phaseEtcdRaw names the phases of raw etcd transactions: etcd's own
// ceiling on this machine for what a decision asks of it.
const phaseEtcdRaw = "etcd-raw"

// recordBytes returns the mean size of the records the server on etcd
// stored, read under the store's record prefix (P r/, store/etcdstore's
// documented layout), and how many there are.
func (e *etcdServer) recordBytes(ctx context.Context) (int, int, error) {
	resp, err := e.cli.Get(ctx, e.prefix+"r/", clientv3.WithPrefix())
	if err != nil {
		return 0, 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, 0, fmt.Errorf("no record under %q: has the etcd store's layout changed?", e.prefix+"r/")
	}
	sum := 0
	for _, kv := range resp.Kvs {
		sum += len(kv.Value)
	}
	return sum / len(resp.Kvs), len(resp.Kvs), nil
}

// runRaw measures etcd alone doing what a decision asks of it at least:
// -concurrency callers, each owning its share of -targets keys, each
// reading a key (a linearizable Get) and writing a value of valueBytes to
// it with a transaction that compares the key's mod revision with the one
// read, in turn, as fast as etcd answers, until -duration or -requests
// transactions. A transaction is a decision: it is counted in Decisions,
// its latency (read and transaction) in the Recommend samples.
func (e *etcdServer) runRaw(ctx context.Context, cfg Config, valueBytes int) *PhaseResult {
	type rawCaller struct {
		keys           []string
		ops, conflicts int
		samples        []time.Duration
		errors         map[string]int
		value          []byte
		reads, txns    uint64
		txnTime        time.Duration
	}
	callers := make([]*rawCaller, cfg.Concurrency)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for i := range callers {
		v := make([]byte, valueBytes)
		for j := range v {
			v[j] = byte(rng.Uint32()) // incompressible, as an encoded record nearly is
		}
		callers[i] = &rawCaller{errors: map[string]int{}, value: v}
	}
	for j := range cfg.Targets {
		c := callers[j%len(callers)]
		c.keys = append(c.keys, fmt.Sprintf("%sraw/%06d", e.prefix, j))
	}
	before, cpu0, members0 := e.walBytes(ctx), cpuTime(), e.membersCPU()
	var issued atomic.Int64
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for _, c := range callers {
		if len(c.keys) == 0 {
			continue
		}
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
				if cfg.Requests > 0 && issued.Add(1) > int64(cfg.Requests) {
					return
				}
				key := c.keys[i%len(c.keys)]
				binary.BigEndian.PutUint64(c.value, uint64(i)) // every write changes the value
				begin := time.Now()
				ok, txnTime, err := readAndSwap(ctx, e.cli, key, c.value)
				c.reads++
				if err != nil {
					c.errors["read+CAS "+status.Code(err).String()]++
					continue
				}
				c.txns++
				c.txnTime += txnTime
				if !ok {
					c.conflicts++
					continue
				}
				c.ops++
				c.samples = append(c.samples, time.Since(begin))
			}
		})
	}
	wg.Wait()
	res := newPhaseResult(phaseEtcdRaw)
	res.Elapsed, res.CPU, res.etcdCPU = time.Since(start), cpuTime()-cpu0, e.membersCPU()-members0
	figs := EtcdFigures{Where: e.where, ValueBytes: valueBytes, walBytes: e.walBytes(ctx) - before}
	for _, c := range callers {
		res.Decisions += c.ops
		res.recommendSamples = append(res.recommendSamples, c.samples...)
		for k, n := range c.errors {
			res.Errors[k] += n
		}
		figs.Reads += c.reads
		figs.Commits += c.txns
		figs.Conflicts += uint64(c.conflicts)
		figs.commitTime += c.txnTime
	}
	res.Etcd = &figs
	return res
}

// readAndSwap reads key and writes value to it if it has not changed
// since (its mod revision, 0 for a key not there yet); it reports whether
// it wrote, and how long the transaction took.
func readAndSwap(ctx context.Context, cli *clientv3.Client, key string, value []byte) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	got, err := cli.Get(ctx, key)
	if err != nil {
		return false, 0, err
	}
	var rev int64
	if len(got.Kvs) > 0 {
		rev = got.Kvs[0].ModRevision
	}
	begin := time.Now()
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(value))).Commit()
	if err != nil {
		return false, 0, err
	}
	return resp.Succeeded, time.Since(begin), nil
}
