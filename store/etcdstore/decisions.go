package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// Decisions implements store.Store with the bbolt store's paging: key's
// decision log, oldest first, kept under P d/<key><time>.
func (s *Store) Decisions(ctx context.Context, key target.Key, q store.DecisionQuery) ([]target.LoggedDecision, string, error) {
	kb, err := s.open(ctx, key)
	if err != nil {
		return nil, "", err
	}
	from, end, size, err := record.DecisionPage(kb, q)
	if err != nil {
		return nil, "", err
	}
	resp, err := s.get(ctx, "decisions", s.prefix+"d/"+string(from), clientv3.WithRange(s.prefix+"d/"+string(end)), clientv3.WithLimit(int64(size)+1))
	if err != nil {
		return nil, "", s.ctxErr(ctx, err)
	}
	var (
		out  []target.LoggedDecision
		next string
	)
	base := len(s.prefix) + 2 + len(kb)
	for _, kv := range resp.Kvs {
		if len(kv.Key) != base+8 {
			continue // another target's key that kb is a prefix of
		}
		if len(out) == size {
			next = record.PageToken(kv.Key[base:])
			break
		}
		d, err := record.DecodeLogged(record.DecisionTime(kv.Key), kv.Value)
		if err != nil {
			return nil, "", &store.CorruptError{Key: key, Err: fmt.Errorf("decision log entry: %w", err)}
		}
		out = append(out, d)
	}
	return out, next, nil
}
