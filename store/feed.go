package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/target"
)

// This file is the change feed: every write that changes what a target
// records — a new decision, an observed event, a deletion — also appends a
// Change, numbered by a revision, to the changes bucket, in the same
// transaction. The server's Watch reads it to resume a stream and follows
// it for live changes.

// DefaultMaxChanges is the default number of changes kept for Changes.
const DefaultMaxChanges = 10000

// ErrOutOfRange: a revision is older than the oldest change still kept, or
// newer than the latest change.
var ErrOutOfRange = errors.New("store: revision out of range")

// ChangeKind says what a Change records.
type ChangeKind string

// The kinds of changes.
const (
	// ChangeDecision: a decision was recorded (target.Record.Last changed).
	ChangeDecision ChangeKind = "Decision"
	// ChangeObservation: an event was recorded (target.Record.Events grew).
	ChangeObservation ChangeKind = "Observation"
	// ChangeDeleted: the record was removed by Delete or Expire.
	ChangeDeleted ChangeKind = "Deleted"
	// ChangeGap: Follow's caller missed changes before the next one (a
	// backend whose watch fell behind its own retention, as etcd's
	// compaction); it carries no Revision, Key or value. A follower that
	// must see every change starts over: it reads again what it keeps.
	// Changes still answers for what is kept. The bbolt store never has
	// gaps.
	ChangeGap ChangeKind = "Gap"
)

// Change is one recorded change of one target.
type Change struct {
	// Revision numbers the change: strictly increasing across the whole
	// store, never reused (also across restarts). Bolt numbers 1, 2, 3…;
	// other backends may leave gaps (store/etcdstore does).
	Revision uint64
	// Key is the target changed.
	Key target.Key
	// Kind says what was recorded.
	Kind ChangeKind
	// Decision is the decision recorded (ChangeDecision); its
	// Decision.History and its Before are empty: the record keeps the
	// history and the status the decision started from
	// (target.Record.History, target.Record.Last.Before), and the feed
	// keeps only what the decision said.
	Decision *target.LastDecision
	// Event is the event recorded (ChangeObservation).
	Event *target.Event
	// At is when the record was removed (ChangeDeleted), by the store's
	// clock (Options.Now).
	At time.Time
	// Created is true on the first change of a record the write created:
	// with the deletions it keeps a count of targets (Count) current.
	Created bool
}

// Feed is the change feed of a store, part of every Store.
type Feed interface {
	// Revision returns the revision of the latest change, 0 before the
	// first.
	Revision(ctx context.Context) (uint64, error)
	// Changes returns the changes after revision `after`, oldest first, at
	// most limit of them. It fails with ErrOutOfRange when some change
	// after `after` is no longer kept, or `after` is beyond the latest
	// revision.
	Changes(ctx context.Context, after uint64, limit int) ([]Change, error)
	// Follow calls fn with the changes of each commit, in revision order,
	// from the committer goroutine, right after the commit and before the
	// commit's writers are answered (so a caller holding its answer never
	// races ahead of the feed), until stop is called. A shared backend
	// whose feed can be held up bounds that wait and says how
	// (store/etcdstore: Options.DeliveryWait); its changes still come in
	// order, none missed. fn must not block and must not call stop; it
	// may keep the slice but not modify it. After stop returns fn is not
	// called again. A backend that can miss
	// changes says so with a ChangeGap change where they were missed.
	Follow(fn func([]Change)) (stop func())
}

// mark is what the change feed needs of a record before an Update's
// function runs.
type mark struct {
	existed bool
	hadLast bool
	lastID  string
	events  int
}

// feedMark marks rec before an Update's function runs; existed says the
// record was stored.
func feedMark(rec *target.Record, existed bool) mark {
	m := mark{existed: existed, events: len(rec.Events)}
	if rec.Last != nil {
		m.hadLast, m.lastID = true, rec.Last.ID
	}
	return m
}

// changes returns the changes an Update of key made to rec since m: a
// decision when the record's last decision is a new one, an observation per
// event added. Writers only append events (the store trims the oldest after
// the function), so a record left with more events than it had holds the
// new ones at the end.
func (m mark) changes(key target.Key, rec *target.Record) []Change {
	var out []Change
	if rec.Last != nil && (!m.hadLast || rec.Last.ID != m.lastID) {
		d := *rec.Last
		d.Before, d.Decision.History = engine.Status{}, engine.History{}
		out = append(out, Change{Key: key, Kind: ChangeDecision, Decision: &d})
	}
	if len(rec.Events) > m.events {
		for _, e := range rec.Events[m.events:] {
			out = append(out, Change{Key: key, Kind: ChangeObservation, Event: &e})
		}
	}
	if len(out) > 0 && !m.existed {
		out[0].Created = true
	}
	return out
}

// deletion is the change recording that key was removed now.
func (b *Bolt) deletion(key target.Key) Change {
	return Change{Key: key, Kind: ChangeDeleted, At: b.opts.Now().UTC()}
}

// appendChanges numbers cs, stores them in tx's changes bucket, and queues
// cs to be published after the commit; the committer drops the changes
// beyond Options.MaxChanges once per transaction (trimChanges). Its error
// leaves tx unusable.
func (b *Bolt) appendChanges(tx *bolt.Tx, cs []Change) error {
	vals, err := encodeChanges(cs, nil, nil)
	if err != nil {
		return err
	}
	return b.appendEncoded(tx, cs, vals)
}

// appendEncoded is appendChanges for changes encoded by encodeChanges
// (vals[i] is cs[i]'s value).
func (b *Bolt) appendEncoded(tx *bolt.Tx, cs []Change, vals [][]byte) error {
	if len(cs) == 0 {
		return nil
	}
	bucket := tx.Bucket(bucketChanges)
	bucket.FillPercent = changesFillPercent
	if !b.revKnown {
		b.rev = 0
		if k, _ := bucket.Cursor().Last(); k != nil {
			b.rev = binary.BigEndian.Uint64(k)
		}
		b.revKnown = true
	}
	for i := range cs {
		rev := b.rev + 1
		cs[i].Revision = rev
		if err := bucket.Put(revisionKey(rev), vals[i]); err != nil {
			return fmt.Errorf("store: append change: %w", err)
		}
		b.rev = rev
	}
	b.pending = append(b.pending, cs...)
	return nil
}

// trimChanges drops the oldest changes of tx's changes bucket beyond
// Options.MaxChanges, when the transaction appended any: once per
// transaction, not per write. Its error leaves tx unusable.
func (b *Bolt) trimChanges(tx *bolt.Tx) error {
	if !b.revKnown {
		return nil
	}
	return b.trimChangesTo(tx, b.rev)
}

// trimChangesTo drops the changes of tx's changes bucket older than the
// newest Options.MaxChanges up to rev, the latest. Its error leaves tx
// unusable.
func (b *Bolt) trimChangesTo(tx *bolt.Tx, rev uint64) error {
	if rev <= uint64(b.opts.MaxChanges) {
		return nil
	}
	bucket := tx.Bucket(bucketChanges)
	cutoff := rev - uint64(b.opts.MaxChanges)
	var old [][]byte
	c := bucket.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= cutoff; k, _ = c.Next() {
		old = append(old, k)
	}
	for _, k := range old {
		if err := bucket.Delete(k); err != nil {
			return fmt.Errorf("store: trim changes: %w", err)
		}
	}
	return nil
}

// publish hands the changes of a commit to the followers.
func (b *Bolt) publish(cs []Change) {
	if len(cs) == 0 {
		return
	}
	b.followMu.Lock()
	defer b.followMu.Unlock()
	for _, f := range b.followers {
		f(cs)
	}
}

// Follow implements Feed.
func (b *Bolt) Follow(fn func([]Change)) (stop func()) {
	b.followMu.Lock()
	defer b.followMu.Unlock()
	if b.followers == nil {
		b.followers = map[*int]func([]Change){}
	}
	id := new(int)
	b.followers[id] = fn
	return func() {
		b.followMu.Lock()
		defer b.followMu.Unlock()
		delete(b.followers, id)
	}
}

// Revision implements Feed.
func (b *Bolt) Revision(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var rev uint64
	err := b.viewLatest(ctx, func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketChanges).Cursor().Last(); k != nil {
			rev = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return rev, err
}

// Count returns the number of records and, read in the same transaction,
// the latest revision: the count is exact as of that revision, and the
// changes after it (Created, ChangeDeleted) keep it current. It reads
// every page of the records bucket.
func (b *Bolt) Count(ctx context.Context) (n int, rev uint64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	err = b.viewLatest(ctx, func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketRecords).Stats().KeyN
		if k, _ := tx.Bucket(bucketChanges).Cursor().Last(); k != nil {
			rev = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return n, rev, err
}

// Changes implements Feed.
func (b *Bolt) Changes(ctx context.Context, after uint64, limit int) ([]Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	var out []Change
	err := b.viewLatest(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketChanges).Cursor()
		var oldest, latest uint64
		if k, _ := c.Last(); k != nil {
			latest = binary.BigEndian.Uint64(k)
		}
		if k, _ := c.First(); k != nil {
			oldest = binary.BigEndian.Uint64(k)
		} else {
			oldest = latest + 1
		}
		switch {
		case after > latest:
			return fmt.Errorf("%w: revision %d is newer than the latest, %d", ErrOutOfRange, after, latest)
		case after+1 < oldest:
			return fmt.Errorf("%w: changes after revision %d are no longer kept (the oldest kept is %d)", ErrOutOfRange, after, oldest)
		}
		for k, v := c.Seek(revisionKey(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			ch, err := decodeChange(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			out = append(out, ch)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// encodeChanges returns the stored form of each change; a change's
// revision is its key, not part of the value, so they can be encoded
// before the transaction that numbers them. last, when not nil, is the
// last decision of the record the changes were made in, and raw, when not
// nil, that record's storage message, marshalled: a decision's entry is
// then assembled from the bytes of the decision in raw
// (decisionChangeOfRecord) instead of being converted and marshalled
// again.
func encodeChanges(cs []Change, last *target.LastDecision, raw []byte) ([][]byte, error) {
	vals := make([][]byte, len(cs))
	for i := range cs {
		c := &cs[i]
		var err error
		if c.Kind == ChangeDecision && last != nil && last.ID == c.Decision.ID {
			var ok bool
			if vals[i], ok = decisionChangeOfRecord(c, raw); !ok {
				vals[i], err = encodeChange(c)
			}
		} else {
			vals[i], err = encodeChange(c)
		}
		if err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// decisionChangeOfRecord returns the stored form of c, a decision
// change of the record whose marshalled message is raw (its last decision
// being c's decision): the bytes marshalChange gives for that decision
// (decisionOfRecord, the tests' oracle, builds its message), assembled
// from the fields of raw as the deterministic marshaller lays them out (in
// field-number order, a oneof last), without marshalling the decision
// again. TestDecisionChangeOfRecord and
// FuzzDecodeRecord check that the bytes are equal. ok is false when raw
// is nil or not laid out as expected, or c's key cannot be stored (not
// UTF-8): marshalChange then decides.
func decisionChangeOfRecord(c *Change, raw []byte) (val []byte, ok bool) {
	if raw == nil || !utf8.ValidString(c.Key.Cluster) || !utf8.ValidString(c.Key.Namespace) || !utf8.ValidString(c.Key.Name) {
		return nil, false
	}
	rf, ok := splitFields(raw, 8)
	if !ok || rf[6].raw == nil {
		return nil, false
	}
	lf, ok := splitFields(rf[6].content, 6)
	if !ok {
		return nil, false
	}
	df, ok := splitFields(lf[3].content, 6)
	if !ok {
		return nil, false
	}
	status := df[4]
	switch {
	case lf[3].raw == nil:
		return nil, false // no decision message: never written so
	case lf[5].raw == nil:
	case !bytes.Equal(lf[5].raw, []byte{5<<3 | byte(protowire.VarintType), 1}) || status.raw != nil:
		return nil, false
	default: // decision_status_is_record_status
		status = rf[4]
	}
	// Decision: desired_replicas, rescale, error, status, explanation; no
	// history.
	dLen := len(df[1].raw) + len(df[2].raw) + len(df[3].raw) + len(df[5].raw)
	if status.raw != nil {
		dLen += bytesFieldLen(4, len(status.content))
	}
	// LastDecision: id, at, decision, from.
	lLen := len(lf[1].raw) + len(lf[2].raw) + bytesFieldLen(3, dLen) + len(lf[6].raw)
	n := bytesFieldLen(4, lLen)
	for i, s := range []string{c.Key.Cluster, c.Key.Namespace, c.Key.Name} {
		if s != "" {
			n += bytesFieldLen(protowire.Number(i+1), len(s))
		}
	}
	if c.Created {
		n += protowire.SizeTag(7) + 1
	}
	b := make([]byte, 0, n)
	for i, s := range []string{c.Key.Cluster, c.Key.Namespace, c.Key.Name} {
		if s != "" {
			b = protowire.AppendTag(b, protowire.Number(i+1), protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
	}
	if c.Created { // the marshaller writes a oneof (kind) after the other fields
		b = protowire.AppendTag(b, 7, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(lLen))
	b = append(b, lf[1].raw...)
	b = append(b, lf[2].raw...)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(dLen))
	b = append(b, df[1].raw...)
	b = append(b, df[2].raw...)
	b = append(b, df[3].raw...)
	if status.raw != nil {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, status.content)
	}
	b = append(b, df[5].raw...)
	b = append(b, lf[6].raw...)
	if len(b) != n {
		return nil, false
	}
	return b, true
}

// bytesFieldLen is the length of a length-delimited field num of n bytes.
func bytesFieldLen(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// field is one field of a marshalled message: all its bytes (tag
// included), and for a length-delimited field its content.
type field struct {
	raw, content []byte
}

// splitFields returns the fields 1…max of the marshalled message b by
// number (index 0 unused). ok is false when b does not parse, a field
// appears twice, or a field is beyond max (the caller would drop it).
func splitFields(b []byte, max protowire.Number) (fs [9]field, ok bool) {
	if max >= protowire.Number(len(fs)) {
		return fs, false
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > max || fs[num].raw != nil {
			return fs, false
		}
		v := protowire.ConsumeFieldValue(num, typ, b[n:])
		if v < 0 {
			return fs, false
		}
		fs[num].raw = b[:n+v]
		if typ == protowire.BytesType {
			fs[num].content, _ = protowire.ConsumeBytes(b[n:])
		}
		b = b[n+v:]
	}
	return fs, true
}

// encodeChange returns the stored form of c (setpoint.storage.v1.Change);
// the revision is the bucket key. A decision is stored without its
// (empty) history and without Before: see Change.Decision.
func encodeChange(c *Change) ([]byte, error) {
	var decision *pb.LastDecision
	if c.Kind == ChangeDecision {
		var e encoder
		d := c.Decision
		decision = &pb.LastDecision{Id: d.ID, At: e.time(d.At), From: &d.From, Decision: e.decision(d.Decision)}
		decision.Decision.History = nil
		if e.err != nil {
			return nil, fmt.Errorf("store: encode change of %s: %w", c.Key, e.err)
		}
	}
	return marshalChange(c, decision)
}

// marshalChange returns the stored form of c, whose decision (for a
// ChangeDecision) is already converted to its message.
func marshalChange(c *Change, decision *pb.LastDecision) ([]byte, error) {
	var e encoder
	m := &pb.Change{Cluster: c.Key.Cluster, Namespace: c.Key.Namespace, Name: c.Key.Name, Created: c.Created}
	switch c.Kind {
	case ChangeDecision:
		m.Kind = &pb.Change_Decision{Decision: decision}
	case ChangeObservation:
		ev := &pb.Event{}
		e.event(*c.Event, ev)
		m.Kind = &pb.Change_Observation{Observation: ev}
	case ChangeDeleted:
		m.Kind = &pb.Change_Deleted{Deleted: e.time(c.At)}
	}
	if e.err != nil {
		return nil, fmt.Errorf("store: encode change of %s: %w", c.Key, e.err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("store: encode change of %s: %w", c.Key, err)
	}
	return b, nil
}

// decodeChange parses the stored change of revision rev.
func decodeChange(rev uint64, b []byte) (c Change, err error) {
	defer func() {
		if p := recover(); p != nil {
			c, err = Change{}, fmt.Errorf("%w: change %d: panic while decoding: %v", ErrCorrupt, rev, p)
		}
	}()
	var m pb.Change
	if err := proto.Unmarshal(b, &m); err != nil {
		return Change{}, fmt.Errorf("%w: change %d: %v", ErrCorrupt, rev, err)
	}
	var d decoder
	c = Change{Revision: rev, Key: target.Key{Cluster: m.GetCluster(), Namespace: m.GetNamespace(), Name: m.GetName()}, Created: m.GetCreated()}
	switch k := m.GetKind().(type) {
	case *pb.Change_Decision:
		l := k.Decision
		// Before, which entries written by older versions carry, is left
		// out as new entries leave it out (Change.Decision).
		c.Kind, c.Decision = ChangeDecision, &target.LastDecision{ID: l.GetId(), At: d.time(l.GetAt()), Decision: d.decision(l.GetDecision()), From: lastFrom(l)}
		c.Decision.Decision.History = engine.History{}
	case *pb.Change_Observation:
		e := d.event(k.Observation)
		c.Kind, c.Event = ChangeObservation, &e
	case *pb.Change_Deleted:
		c.Kind, c.At = ChangeDeleted, d.time(k.Deleted)
	default:
		return Change{}, fmt.Errorf("%w: change %d: no kind", ErrCorrupt, rev)
	}
	if d.err != nil {
		return Change{}, fmt.Errorf("%w: change %d: %v", ErrCorrupt, rev, d.err)
	}
	return c, nil
}
