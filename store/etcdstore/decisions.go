package etcdstore

import (
	"context"
	"encoding/base64"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

// Decisions implements store.Store with the bbolt store's paging: key's
// decision log, oldest first, kept under P d/<key><time>.
func (s *Store) Decisions(ctx context.Context, key target.Key, q store.DecisionQuery) ([]target.LoggedDecision, string, error) {
	if s.isClosed() {
		return nil, "", store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	kb, err := keyBytes(key)
	if err != nil {
		return nil, "", err
	}
	switch {
	case q.PageSize < 0:
		return nil, "", fmt.Errorf("%w: negative page size %d", store.ErrInvalid, q.PageSize)
	case q.PageSize == 0:
		q.PageSize = store.DefaultDecisionsPageSize
	case q.PageSize > store.MaxDecisionsPageSize:
		q.PageSize = store.MaxDecisionsPageSize
	}
	from := s.decisionKey(kb, q.From)
	if q.PageToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || len(raw) != 8 {
			return nil, "", fmt.Errorf("%w: page token %q", store.ErrInvalid, q.PageToken)
		}
		from = s.prefix + "d/" + string(kb) + string(raw)
	}
	end := s.prefix + "d/" + string(kb) + "\xff\xff\xff\xff\xff\xff\xff\xff"
	if !q.To.IsZero() {
		end = s.decisionKey(kb, q.To)
	}
	resp, err := s.get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(q.PageSize)+1))
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
		if len(out) == q.PageSize {
			next = base64.RawURLEncoding.EncodeToString(kv.Key[base:])
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
