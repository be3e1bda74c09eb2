package record

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"

	"github.com/setpointhq/setpoint/store"
)

// The pages of List and Decisions, as every backend reads them: the same
// checks, bounds and tokens, so a token means the same on either.

// ListPage returns what a List of q reads: the key prefix of the records q
// selects, the key after which the page starts (nil: from the prefix on),
// and the page size (store.DefaultPageSize for 0, at most
// store.MaxPageSize). It fails with store.ErrInvalid for a namespace
// without a cluster, a negative page size, or a token of another query.
func ListPage(q store.Query) (prefix, after []byte, size int, err error) {
	if q.Namespace != "" && q.Cluster == "" {
		return nil, nil, 0, fmt.Errorf("%w: a namespace filter requires a cluster", store.ErrInvalid)
	}
	prefix = KeyPrefix(q.Cluster, q.Namespace)
	size = cmp.Or(q.PageSize, store.DefaultPageSize)
	if size < 0 {
		return nil, nil, 0, fmt.Errorf("%w: negative page size %d", store.ErrInvalid, q.PageSize)
	}
	if q.PageToken != "" {
		after, err = base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || !bytes.HasPrefix(after, prefix) {
			return nil, nil, 0, fmt.Errorf("%w: page token %q does not belong to this query", store.ErrInvalid, q.PageToken)
		}
	}
	return prefix, after, min(size, store.MaxPageSize), nil
}

// DecisionPage returns the decision-log keys (DecisionKey(rk, …)) a
// Decisions call of q for the target of record key rk reads, from start up
// to before end, and the page size (store.DefaultDecisionsPageSize for 0,
// at most store.MaxDecisionsPageSize). It fails with store.ErrInvalid for
// a negative page size or a malformed token.
func DecisionPage(rk []byte, q store.DecisionQuery) (start, end []byte, size int, err error) {
	switch {
	case q.PageSize < 0:
		return nil, nil, 0, fmt.Errorf("%w: negative page size %d", store.ErrInvalid, q.PageSize)
	case q.PageSize == 0:
		size = store.DefaultDecisionsPageSize
	default:
		size = min(q.PageSize, store.MaxDecisionsPageSize)
	}
	start = DecisionKey(rk, q.From)
	if q.PageToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || len(raw) != TimeLength {
			return nil, nil, 0, fmt.Errorf("%w: page token %q", store.ErrInvalid, q.PageToken)
		}
		start = append(slices.Clone(rk), raw...)
	}
	end = append(slices.Clone(rk), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	if !q.To.IsZero() {
		end = DecisionKey(rk, q.To)
	}
	return start, end, size, nil
}

// PageToken is the token of the page after the one whose last key (a
// record key, or a decision-log key's time after its record key) is k.
func PageToken(k []byte) string { return base64.RawURLEncoding.EncodeToString(k) }
