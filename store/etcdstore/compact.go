package etcdstore

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file keeps etcd's history, which is the store's change feed, from
// growing without bound. Every Options.CompactEvery each server proposes to
// take a turn by bumping a shared key (P compact) with a transaction that
// compares the key's version with the one the server last saw; the one
// server whose transaction succeeds compacts etcd up to the revision it
// noted one turn earlier, and the others only learn the new version. So,
// however many servers share the prefix, etcd is compacted about once per
// interval and always keeps at least one interval of history: a Watch
// resume point stays good for at least CompactEvery.

func (s *Store) compactKey() string { return s.prefix + "compact" }

// compactLoop runs compaction turns every s.opts.CompactEvery until ctx
// ends.
func (s *Store) compactLoop(ctx context.Context) {
	defer close(s.compactDone)
	t := time.NewTicker(s.opts.CompactEvery)
	defer t.Stop()
	var version, noted int64 // the compact key's version last seen; the revision noted at that turn
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var err error
		version, noted, err = s.compactTurn(ctx, version, noted)
		if err != nil && ctx.Err() == nil && s.opts.Logger != nil {
			s.opts.Logger.Warn("etcdstore: compaction failed; the next turn tries again", "err", err)
		}
	}
}

// compactTurn tries to take the turn after the compact key's version
// `version`; the winner compacts up to `noted` (when not 0). It returns the
// key's version now and the revision to compact at the next turn.
func (s *Store) compactTurn(ctx context.Context, version, noted int64) (int64, int64, error) {
	start := time.Now() // observed as no conflict: a turn another server took is no lost write
	resp, err := s.txn(ctx, "", []clientv3.Cmp{clientv3.Compare(clientv3.Version(s.compactKey()), "=", version)},
		[]clientv3.Op{clientv3.OpPut(s.compactKey(), "")}, []clientv3.Op{clientv3.OpGet(s.compactKey())})
	s.observe("compact", start, false)
	if err != nil {
		return version, noted, err
	}
	if !resp.Succeeded {
		// Another server took this turn; start over from its version.
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			version = kvs[0].Version
		}
		return version, resp.Header.Revision, nil
	}
	if noted > 0 {
		cctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		_, err := s.cli.Compact(cctx, noted)
		cancel()
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return version + 1, resp.Header.Revision, err
		}
	}
	return version + 1, resp.Header.Revision, nil
}
