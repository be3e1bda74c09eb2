package etcdstore

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// EtcdRevision exports etcdRevision to the tests.
var EtcdRevision = etcdRevision

// FeedMember is the endpoint the store's feed watch is on now.
func FeedMember(s *Store) string { v, _ := s.feedOn.Load().(string); return v }

// UpdateTogether prepares an update of each of keys with fn, on the
// records s has cached, and commits them as one batch of waiting writes
// (commitBatch); it returns the keys whose records had moved.
func UpdateTogether(s *Store, keys []target.Key, fn func(*target.Record) error) ([]target.Key, error) {
	var batch []*write
	for _, k := range keys {
		kb, err := record.Key(k)
		if err != nil {
			return nil, err
		}
		e, _ := s.cache.get(k)
		w, _, err := s.prepare(k, kb, e, false, fn)
		if err != nil {
			return nil, err
		}
		w.done = make(chan struct{})
		batch = append(batch, w)
	}
	s.commitBatch(batch)
	var moved []target.Key
	for _, w := range batch {
		if w.err != nil {
			return nil, w.err
		}
		if w.moved != nil {
			moved = append(moved, w.key)
		}
	}
	return moved, nil
}

// NewWatchedBy is New with after called by the feed's watcher after each
// watch response it has handed over, with the response's header revision
// and the revision of its last event; true makes the watcher end that
// watch and start another from where the feed has been read.
func NewWatchedBy(ctx context.Context, cli *clientv3.Client, opts Options, after func(header, last int64) (restart bool)) (*Store, error) {
	opts.afterWatchResponse = after
	return New(ctx, cli, opts)
}
