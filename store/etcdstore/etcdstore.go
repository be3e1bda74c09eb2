// Package etcdstore provides a store.Store kept in etcd, so that several
// setpoint-server processes share one durable history.
//
// Under a prefix P (Options.Prefix) it keeps:
//
//	P r/<key>        one record per target, in store/record's codec
//	P d/<key><time>  the target's decision log, as the bbolt store keeps it
//	P feed           the changes of the latest transaction that recorded
//	                 any (an EtcdFeed message, storage/v1/etcd.proto)
//
// An Update reads the record (or takes it from a cache of the records this
// server last wrote), runs the caller's function, and commits in an etcd
// transaction that compares the record's mod revision. Writes that wait
// while earlier transactions are under way share the next one (commit.go):
// it compares every record it writes, puts them, their decision log
// entries and one feed entry. If another writer moved a record first, that
// write's function runs again on the record as stored, and the others are
// committed without it. Two servers deciding one target therefore
// serialize and neither decision is lost, while updates of different
// targets never conflict. A decision trims its target's decision log once
// per slice of DecisionRetention/16 (trimDue). The function's error (a
// refusal) is checked too: made on a cached record, it stands only once a
// linearizable read shows the record has not moved.
//
// The change feed is etcd's own history of the feed key. A decision is
// kept there as a flag: the record put in the same transaction in the
// write's place holds it, so the feed's watch covers the records too. A
// change's revision is the etcd revision of its transaction shifted left
// by 16 bits plus its index in it, so revisions increase strictly but are
// not dense. Changes reads past changes with a watch from that revision;
// changes etcd has compacted away are answered with store.ErrOutOfRange,
// as the bbolt store answers for changes beyond its MaxChanges. The feed's
// retention is therefore etcd's compaction: Options.CompactEvery makes the
// servers compact it themselves, as Kubernetes API servers do, or etcd
// does with --auto-compaction-mode=periodic --auto-compaction-retention
// (docs/scale-out.md).
//
// # Members that hang
//
// The store reaches each member over its own connection and routes
// around one that fails its probe (members.go): a member that hangs (a
// paused VM, a stuck disk, a network that drops packets) costs about a
// second, not every caller's deadline. A request cut short that way, or
// by its per-attempt bound (Options.RequestTimeout), answers
// store.ErrUnavailable: a read only after every member was tried, a
// write at once, its outcome unknown.
//
// A write waits at most Options.DeliveryWait for its changes to reach
// Follow's callbacks (Follow says how a feed held up is caught up). A
// caller holding a write's answer may therefore, for at most as long as
// the feed is held up, be ahead of this server's Watch streams; a Watch
// resumed from a point ahead of the server's feed starts there (the server
// checks the point against Revision).
//
// # Size budget
//
// etcd refuses requests larger than its --max-request-bytes (1.5 MiB by
// default) and transactions of more than --max-txn-ops operations (128 by
// default; the store sends at most that many). The store refuses, with
// store.ErrInvalid and before sending, a record whose encoded form is
// larger than MaxRecordBytes (1 MiB), and a write whose record, changes
// and decision log entry together are larger than MaxWriteBytes (1.25
// MiB), leaving a quarter MiB for the keys and the transaction's framing;
// a transaction carries at most MaxWriteBytes of values. Keys are bounded
// as the bbolt store bounds them.
package etcdstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// MaxRecordBytes is the largest encoded record the store sends to etcd.
const MaxRecordBytes = 1 << 20

// MaxWriteBytes is the largest sum of the values of one write (record,
// changes, decision log entry) the store sends to etcd.
const MaxWriteBytes = MaxRecordBytes + MaxRecordBytes/4

// DefaultPrefix is the key prefix of Options.Prefix's zero value.
const DefaultPrefix = "/setpoint/"

// DefaultCacheBytes is the size of Options.CacheBytes's zero value.
const DefaultCacheBytes = 64 << 20

// Options configure a Store. The zero value selects every default.
type Options struct {
	// Prefix is put before every key the store writes; "" means
	// DefaultPrefix. Stores with different prefixes share nothing.
	Prefix string
	// Limits bound each record as boltstore.Options does for bbolt; 0 means
	// store.DefaultMaxEvents (DefaultMaxHistory).
	record.Limits
	// DecisionRetention is how long each decision stays in its target's
	// decision log; 0 means store.DefaultDecisionRetention, negative keeps
	// no log. The log is trimmed by the target's decisions, once per
	// slice of DecisionRetention/16: a decision may stay up to that much
	// longer (about 11 minutes at the default 3 h).
	DecisionRetention time.Duration
	// CacheBytes bounds the encoded records the store remembers to skip
	// the read before an update; 0 means DefaultCacheBytes, negative
	// disables the cache.
	CacheBytes int
	// Now stamps deletions in the change feed; time.Now when nil.
	Now func() time.Time
	// CompactEvery, when positive, makes the servers sharing the prefix
	// compact etcd's whole history (every prefix's: as a Kubernetes API
	// server does) about once per CompactEvery, keeping at least
	// CompactEvery of it; 0 leaves compaction to etcd
	// (--auto-compaction-retention) or to another client.
	CompactEvery time.Duration
	// Logger receives what the store cannot report to a caller (a failed
	// compaction); nil discards it.
	Logger *slog.Logger
	// Observe, when set, is told how long each etcd request took and
	// whether a transaction lost a race for its target (a conflict, then
	// retried).
	Observe func(op string, d time.Duration, conflict bool)
	// RequestTimeout bounds each attempt of a request on one member; 0
	// means DefaultRequestTimeout. A read that runs out is tried on
	// another member; a write answers store.ErrUnavailable.
	RequestTimeout time.Duration
	// ProbeInterval is how often each member is probed; 0 means
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// ProbeTimeout is how soon a member must answer a probe to stay
	// healthy; 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// DeliveryWait bounds how long a write waits for its changes to reach
	// Follow's callbacks before it returns; 0 means DefaultDeliveryWait.
	DeliveryWait time.Duration

	// afterWatchResponse, when set (by tests), is called by the feed's
	// watcher after it has handed over a watch response, with the
	// response's header revision and the revision of its last event (0
	// when none); true ends that watch, to be started again.
	afterWatchResponse func(header, last int64) (restart bool)
}

// The defaults of Options' timing fields.
const (
	// DefaultRequestTimeout is Options.RequestTimeout's default.
	DefaultRequestTimeout = 2 * time.Second
	// DefaultProbeInterval is Options.ProbeInterval's default.
	DefaultProbeInterval = 250 * time.Millisecond
	// DefaultProbeTimeout is Options.ProbeTimeout's default.
	DefaultProbeTimeout = 750 * time.Millisecond
	// DefaultDeliveryWait is Options.DeliveryWait's default.
	DefaultDeliveryWait = 500 * time.Millisecond
)

// ClientConfig returns cfg with what the store relies on set where cfg
// leaves it zero: keepalive pings every 10 s (gRPC's least), a connection
// whose member does not answer one within 3 s closed; a 5 s dial timeout;
// and a logger that discards (the store reports etcd's errors itself).
// The store's own probes find a hung member much sooner (members.go); the
// keepalives close what the probes route around.
func ClientConfig(cfg clientv3.Config) clientv3.Config {
	cfg.DialKeepAliveTime = cmp.Or(cfg.DialKeepAliveTime, 10*time.Second)
	cfg.DialKeepAliveTimeout = cmp.Or(cfg.DialKeepAliveTimeout, 3*time.Second)
	cfg.DialTimeout = cmp.Or(cfg.DialTimeout, 5*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return cfg
}

// Store is a store.Store kept in etcd. Create it with New; it is safe for
// concurrent use.
type Store struct {
	cli     *clientv3.Client
	members *members
	opts    Options
	prefix  string
	cache   *recordCache

	cancel      context.CancelFunc
	done        chan struct{} // closed when the feed watcher has stopped
	compactDone chan struct{} // closed when compaction has stopped
	probeDone   chan struct{} // closed when probing has stopped
	feedOn      atomic.Value  // string: the endpoint the feed watch is on

	mu        sync.Mutex
	cond      *sync.Cond
	delivered int64 // etcd revision the feed watcher has delivered up to
	closed    bool
	followers map[*int]func([]store.Change)

	// The writes' batches (commit.go).
	bctx     context.Context // the transactions', ended by Close
	senders  sync.WaitGroup
	bmu      sync.Mutex
	bclosed  bool
	pending  []*write
	inflight int // transactions under way
}

var _ store.Store = (*Store)(nil)

// New returns a Store on cli, which the Store does not close. It opens its
// own connection to each of cli's endpoints (members.go), reads the
// current etcd revision and follows the change feed from there.
func New(ctx context.Context, cli *clientv3.Client, opts Options) (*Store, error) {
	if opts.MaxEvents < 0 || opts.MaxHistory < 0 || opts.CompactEvery < 0 ||
		opts.RequestTimeout < 0 || opts.ProbeInterval < 0 || opts.ProbeTimeout < 0 || opts.DeliveryWait < 0 {
		return nil, fmt.Errorf("%w: negative option", store.ErrInvalid)
	}
	opts.RequestTimeout = cmp.Or(opts.RequestTimeout, DefaultRequestTimeout)
	opts.ProbeInterval = cmp.Or(opts.ProbeInterval, DefaultProbeInterval)
	opts.ProbeTimeout = cmp.Or(opts.ProbeTimeout, DefaultProbeTimeout)
	opts.DeliveryWait = cmp.Or(opts.DeliveryWait, DefaultDeliveryWait)
	opts.Prefix = cmp.Or(opts.Prefix, DefaultPrefix)
	opts.DecisionRetention = cmp.Or(opts.DecisionRetention, store.DefaultDecisionRetention)
	opts.CacheBytes = cmp.Or(opts.CacheBytes, DefaultCacheBytes)
	opts.MaxEvents = cmp.Or(opts.MaxEvents, store.DefaultMaxEvents)
	opts.MaxHistory = cmp.Or(opts.MaxHistory, store.DefaultMaxHistory)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{cli: cli, opts: opts, prefix: opts.Prefix, cache: newRecordCache(opts.CacheBytes),
		done: make(chan struct{}), compactDone: make(chan struct{}), probeDone: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	ms, err := dialMembers(cli, opts, s.feedKey())
	if err != nil {
		return nil, err
	}
	s.members = ms
	resp, err := s.get(ctx, "", s.feedKey(), clientv3.WithCountOnly())
	if err != nil {
		ms.close()
		return nil, fmt.Errorf("etcdstore: %w", err)
	}
	s.delivered = resp.Header.Revision
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.bctx = cancel, wctx
	go ms.probeLoop(wctx, s.probeDone)
	go s.watch(wctx, resp.Header.Revision+1)
	if opts.CompactEvery > 0 {
		go s.compactLoop(wctx)
	} else {
		close(s.compactDone)
	}
	return s, nil
}

func (s *Store) recKey(kb []byte) string { return s.prefix + "r/" + string(kb) }

func (s *Store) decisionKey(kb []byte, at time.Time) string {
	return s.prefix + "d/" + string(record.DecisionKey(kb, at))
}

// observe reports one etcd request to Options.Observe, unless op is "".
func (s *Store) observe(op string, start time.Time, conflict bool) {
	if s.opts.Observe != nil && op != "" {
		s.opts.Observe(op, time.Since(start), conflict)
	}
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// ready returns store.ErrClosed after Close, else ctx's error.
func (s *Store) ready(ctx context.Context) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// open is ready, then key's record key bytes.
func (s *Store) open(ctx context.Context, key target.Key) ([]byte, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return record.Key(key)
}

// Close stops following the feed; later calls return store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.bmu.Lock()
	s.bclosed = true
	s.bmu.Unlock()
	s.cancel()
	s.senders.Wait()
	<-s.done
	<-s.compactDone
	<-s.probeDone
	s.members.close()
	return nil
}

// get reads from one member, or from others while the read may be retried
// (members.run); op names the read for Options.Observe ("" is not
// observed).
func (s *Store) get(ctx context.Context, op, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	start := time.Now()
	var resp clientv3.OpResponse
	err := s.members.run(ctx, true, func(actx context.Context, m *member) (err error) {
		resp, err = m.kv.Do(actx, clientv3.OpGet(key, opts...))
		return err
	})
	s.observe(op, start, false)
	return resp.Get(), err
}

// txn commits one transaction (members.run); op names it for
// Options.Observe, which is told when its compares failed.
func (s *Store) txn(ctx context.Context, op string, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	start := time.Now()
	var resp clientv3.OpResponse
	err := s.members.run(ctx, readOnly(then, els), func(actx context.Context, m *member) (err error) {
		resp, err = m.kv.Do(actx, clientv3.OpTxn(cmps, then, els))
		return err
	})
	s.observe(op, start, err == nil && !resp.Txn().Succeeded)
	return resp.Txn(), err
}

// Expect implements store.Store: the writes that wait for a transaction
// go together anyway (commit.go), so there is no batch to hold open for
// announced writes.
func (s *Store) Expect(int) {}

// Healthy reports whether etcd answers a linearizable read;
// store.ErrClosed after Close.
func (s *Store) Healthy(ctx context.Context) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	_, err := s.get(ctx, "", s.feedKey(), clientv3.WithCountOnly())
	return err
}

// stored is a record as etcd holds it: its value and mod revision (0 when
// there is none).
type stored struct {
	val []byte
	mod int64
}

// storedOf returns the record of a read of one record key.
func storedOf(kvs []*mvccpb.KeyValue) stored {
	if len(kvs) == 0 {
		return stored{}
	}
	return stored{val: kvs[0].Value, mod: kvs[0].ModRevision}
}

// Update implements store.Store: read (or take from the cache), run fn,
// commit if the record did not move, else run fn again on the record the
// failed transaction answered. Its write shares one etcd transaction with
// the writes waiting with it (commit.go); a record not in the cache is
// read first. When fn fails on a record not known to be current, Update
// reads the record linearizably and runs fn again if it moved, so that an
// error, like a write, is about the record as stored when Update was
// called or later.
func (s *Store) Update(ctx context.Context, key target.Key, fn func(rec *target.Record) error) (target.Record, error) {
	return s.update(ctx, key, false, fn)
}

// update is Update with the records fn runs on decoded by
// record.DecodeFor(…, forDecision): for Decide, of the last decision only
// ID and At.
func (s *Store) update(ctx context.Context, key target.Key, forDecision bool, fn func(rec *target.Record) error) (target.Record, error) {
	kb, err := s.open(ctx, key)
	if err != nil {
		return target.Record{}, err
	}
	rk := s.recKey(kb)
	// cur is the record fn runs on: a guess (cached, or read serializably)
	// until current says it was read linearizably or answered by a
	// failed transaction.
	cur, ok := s.cache.get(key)
	if !ok {
		// Serializable: the transaction's compare catches a stale read,
		// and its answer replaces it.
		resp, err := s.get(ctx, "read", rk, clientv3.WithSerializable())
		if err != nil {
			return target.Record{}, s.ctxErr(ctx, err)
		}
		cur = storedOf(resp.Kvs)
	}
	current := false
	for {
		w, rec, err := s.prepare(key, kb, cur, forDecision, fn)
		if err != nil {
			if current {
				return target.Record{}, err
			}
			// An error is an answer about the stored record, and no
			// compare checks it: make sure fn refused the current one.
			resp, rerr := s.get(ctx, "read", rk)
			if rerr != nil {
				return target.Record{}, s.ctxErr(ctx, rerr)
			}
			latest := storedOf(resp.Kvs)
			if latest.mod == cur.mod {
				return target.Record{}, err
			}
			cur, current = latest, true
			continue
		}
		if err := s.commit(ctx, w); err != nil {
			return target.Record{}, err
		}
		switch {
		case w.err != nil:
			return target.Record{}, s.ctxErr(ctx, w.err)
		case w.moved != nil:
			cur, current = *w.moved, true
			continue
		case w.records:
			if err := s.waitDelivered(ctx, w.rev); err != nil {
				return target.Record{}, err
			}
		}
		return rec, nil
	}
}

// prepare runs fn on the record cur of key (whose record.Key is kb),
// decoded by record.DecodeFor(…, forDecision), and returns the write that
// stores the outcome, and the record.
func (s *Store) prepare(key target.Key, kb []byte, cur stored, forDecision bool, fn func(*target.Record) error) (*write, target.Record, error) {
	rec := target.Record{Key: key}
	if cur.mod != 0 {
		var err error
		if rec, err = record.DecodeFor(key, cur.val, forDecision); err != nil {
			s.cache.drop(key) // err is a *store.CorruptError
			return nil, target.Record{}, err
		}
	}
	var prevAt time.Time // the previous decision's time; zero when none
	if rec.Last != nil {
		prevAt = rec.Last.At
	}
	changes, err := record.Apply(key, &rec, cur.mod != 0, s.opts.Limits, fn)
	if err != nil {
		return nil, target.Record{}, err
	}
	// A decision, the first change when there is one, is read back from
	// the record (EtcdFeedWrite.decided), so it is not encoded as a change.
	decided := len(changes) > 0 && changes[0].Decision != nil
	others := changes
	if decided {
		others = changes[1:]
	}
	val, vals, err := record.EncodeWrite(&rec, others, record.Compress)
	if err != nil {
		return nil, target.Record{}, err
	}
	if len(val) > MaxRecordBytes {
		return nil, target.Record{}, fmt.Errorf("%w: record of %s is %d bytes encoded, more than %d", store.ErrInvalid, key, len(val), MaxRecordBytes)
	}
	w := &write{key: key, rk: s.recKey(kb), mod: cur.mod, val: val, records: len(changes) > 0, size: len(val),
		feed: &pb.EtcdFeedWrite{Decided: decided, Created: decided && changes[0].Created, Changes: vals}}
	w.ops = []clientv3.Op{clientv3.OpPut(w.rk, string(val))}
	if len(changes) > 0 {
		for _, v := range vals {
			w.size += len(v)
		}
		if changes[0].Kind == store.ChangeDecision && s.opts.DecisionRetention >= 0 {
			logged, err := record.EncodeLogged(rec.Last)
			if err != nil {
				return nil, target.Record{}, fmt.Errorf("etcdstore: update %s: decision log: %w", key, err)
			}
			w.size += len(logged)
			if trimDue(prevAt, rec.Last.At, s.opts.DecisionRetention) {
				w.ops = append(w.ops, clientv3.OpDelete(s.decisionKey(kb, time.Time{}), clientv3.WithRange(s.decisionKey(kb, rec.Last.At.Add(-s.opts.DecisionRetention)))))
			}
			w.ops = append(w.ops, clientv3.OpPut(s.decisionKey(kb, rec.Last.At), string(logged)))
		}
	}
	if w.size > MaxWriteBytes {
		return nil, target.Record{}, fmt.Errorf("%w: the write of %s is %d bytes (record, changes and decision log), more than %d", store.ErrInvalid, key, w.size, MaxWriteBytes)
	}
	return w, rec, nil
}

// trimSlices is how many trim slices one DecisionRetention holds: a
// target's decision log is trimmed by the first decision of each slice,
// so it keeps a decision at most DecisionRetention/trimSlices longer than
// DecisionRetention (counted, as always, to the target's next decision).
const trimSlices = 16

// trimDue reports whether the decision at `at`, following the one at prev
// (zero when none), trims its target's decision log to retention: when it
// is the first of its trim slice (retention/trimSlices of time, as
// time.Truncate counts them), so that most decisions write no range
// delete (a range scan on every member).
func trimDue(prev, at time.Time, retention time.Duration) bool {
	slice := max(retention/trimSlices, 1)
	return prev.IsZero() || !prev.Truncate(slice).Equal(at.Truncate(slice))
}

// ctxErr returns ctx's error when it has ended, store.ErrClosed after
// Close, else err wrapped: as store.ErrUnavailable when etcd had no leader,
// timed out or could not be reached.
func (s *Store) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.isClosed() {
		return store.ErrClosed
	}
	if unavailable(err) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			// The store ended the attempt (its bound, or its member's
			// failed probe), not the caller: not the caller's context
			// error.
			return fmt.Errorf("%w: etcd: %v", store.ErrUnavailable, err)
		}
		return fmt.Errorf("%w: etcd: %w", store.ErrUnavailable, err)
	}
	return fmt.Errorf("etcdstore: %w", err)
}

// unavailable reports whether err says etcd could not serve the request
// now (no leader, leader changed, timed out, unreachable, or an attempt the
// store ended: its bound, or its member's failed probe), as opposed to
// refusing it: a read that failed so may succeed on another member.
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable || ee.Code() == codes.DeadlineExceeded
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key target.Key) (target.Record, error) {
	kb, err := s.open(ctx, key)
	if err != nil {
		return target.Record{}, err
	}
	resp, err := s.get(ctx, "get", s.recKey(kb))
	if err != nil {
		return target.Record{}, s.ctxErr(ctx, err)
	}
	if len(resp.Kvs) == 0 {
		return target.Record{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	return record.Decode(key, resp.Kvs[0].Value)
}

// List implements store.Store with the bbolt store's paging and tokens.
func (s *Store) List(ctx context.Context, q store.Query) ([]target.Record, string, error) {
	if err := s.ready(ctx); err != nil {
		return nil, "", err
	}
	prefix, after, size, err := record.ListPage(q)
	if err != nil {
		return nil, "", err
	}
	from := s.recKey(prefix)
	if after != nil {
		from = s.recKey(after) + "\x00"
	}
	end := clientv3.GetPrefixRangeEnd(s.recKey(prefix))
	resp, err := s.get(ctx, "list", from, clientv3.WithRange(end), clientv3.WithLimit(int64(size)+1))
	if err != nil {
		return nil, "", s.ctxErr(ctx, err)
	}
	var (
		records []target.Record
		corrupt []error
		next    string
	)
	kvs := resp.Kvs
	if len(kvs) > size {
		kvs = kvs[:size]
		next = record.PageToken(kvs[size-1].Key[len(s.recKey(nil)):])
	}
	for _, kv := range kvs {
		key, err := record.ParseKey(kv.Key[len(s.recKey(nil)):])
		if err != nil {
			corrupt = append(corrupt, &store.CorruptError{Err: err})
			continue
		}
		rec, err := record.Decode(key, kv.Value)
		if err != nil {
			corrupt = append(corrupt, err)
			continue
		}
		records = append(records, rec)
	}
	return records, next, errors.Join(corrupt...)
}

// remove deletes the record at rk (as read at modRev) and its decision
// log, and records its deletion; ok is false when the record moved
// meanwhile.
func (s *Store) remove(ctx context.Context, key target.Key, rk string, modRev int64) (ok bool, err error) {
	c, err := record.EncodeChange(&store.Change{Key: key, Kind: store.ChangeDeleted, At: s.opts.Now().UTC()})
	if err != nil {
		return false, err
	}
	feed, err := feedValue([]*pb.EtcdFeedWrite{{Changes: [][]byte{c}}})
	if err != nil {
		return false, err
	}
	resp, err := s.txn(ctx, "delete", []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(rk), "=", modRev)}, []clientv3.Op{
		clientv3.OpDelete(rk),
		clientv3.OpDelete(s.prefix+"d/"+rk[len(s.recKey(nil)):], clientv3.WithPrefix()),
		clientv3.OpPut(s.feedKey(), string(feed)),
	}, nil)
	s.cache.drop(key)
	if err != nil {
		return false, s.ctxErr(ctx, err)
	}
	if resp.Succeeded {
		return true, s.waitDelivered(ctx, resp.Header.Revision)
	}
	return false, nil
}

// Delete implements store.Store; it also removes an undecodable record.
func (s *Store) Delete(ctx context.Context, key target.Key) error {
	kb, err := s.open(ctx, key)
	if err != nil {
		return err
	}
	rk := s.recKey(kb)
	for {
		resp, err := s.get(ctx, "read", rk)
		if err != nil {
			return s.ctxErr(ctx, err)
		}
		if len(resp.Kvs) == 0 {
			return fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		ok, err := s.remove(ctx, key, rk, resp.Kvs[0].ModRevision)
		if err != nil || ok {
			return err
		}
	}
}

// Expire implements store.Store. It reads every record (a page at a time):
// its cost follows the size of the store. An undecodable record is kept.
func (s *Store) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	removed := 0
	from, end := s.recKey(nil), clientv3.GetPrefixRangeEnd(s.recKey(nil))
	for {
		resp, err := s.get(ctx, "list", from, clientv3.WithRange(end), clientv3.WithLimit(store.MaxPageSize))
		if err != nil {
			return removed, s.ctxErr(ctx, err)
		}
		for _, kv := range resp.Kvs {
			key, err := record.ParseKey(kv.Key[len(s.recKey(nil)):])
			if err != nil {
				continue
			}
			rec, err := record.Decode(key, kv.Value)
			if err != nil || !rec.LastSeen.Before(cutoff) {
				continue
			}
			ok, err := s.remove(ctx, key, string(kv.Key), kv.ModRevision)
			if err != nil {
				return removed, err
			}
			if ok {
				removed++
			}
			// Not ok: the record was written meanwhile (seen again) or
			// the feed moved; the next Expire looks at it again.
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return removed, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
