package record

// Key encoding.
//
// A record key is the concatenation of the escaped Cluster, Namespace and
// Name, each followed by the terminator 0x00 0x01; inside a component each
// 0x00 byte is written as 0x00 0xFF. The encoding has two properties the
// backends rely on:
//
//   - byte order is (Cluster, Namespace, Name) order, comparing each
//     component as a byte string, so a cursor walks targets in key order;
//   - the encoding of a cluster, or of a cluster and a namespace, is a
//     prefix of exactly the keys of that cluster (namespace), so a List
//     filter is a prefix scan.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
	bolt "go.etcd.io/bbolt"
)

const (
	escByte = 0x00 // introduces an escape or a terminator
	escNul  = 0xFF // escByte escNul: a 0x00 byte inside a component
	escTerm = 0x01 // escByte escTerm: end of a component
	// TimeLength is the length of a time in a key (OrderedTime, 8 bytes
	// big-endian).
	TimeLength = 8
)

// MaxKeyLength bounds an encoded record key so that a key built on it
// with a time (a decision-log key, an expiry index entry) still fits
// bbolt's key limit.
const MaxKeyLength = bolt.MaxKeySize - TimeLength

// ErrKeyTooLong reports a target key longer than MaxKeyLength encoded.
var ErrKeyTooLong = errors.New("record: key too long to store")

// errBadKey reports a stored key that is not a valid record key.
var errBadKey = errors.New("malformed key")

// appendComponent appends the escaped s and its terminator to dst.
func appendComponent(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == escByte {
			dst = append(dst, escByte, escNul)
			continue
		}
		dst = append(dst, s[i])
	}
	return append(dst, escByte, escTerm)
}

// Key returns the ordered byte form of k (record keys sort as List walks
// them). It fails with an error matching ErrKeyTooLong and store.ErrInvalid when the form is
// longer than MaxKeyLength.
func Key(k target.Key) ([]byte, error) {
	b := make([]byte, 0, len(k.Cluster)+len(k.Namespace)+len(k.Name)+6)
	b = appendComponent(b, k.Cluster)
	b = appendComponent(b, k.Namespace)
	b = appendComponent(b, k.Name)
	if len(b) > MaxKeyLength {
		return nil, fmt.Errorf("%w: %w: key %s is %d bytes encoded, more than %d", store.ErrInvalid, ErrKeyTooLong, k, len(b), MaxKeyLength)
	}
	return b, nil
}

// KeyPrefix returns the common prefix of the Keys of the targets of a
// cluster (namespace empty) or of one namespace of it; both empty select
// all (an empty prefix).
func KeyPrefix(cluster, namespace string) []byte {
	switch {
	case namespace != "":
		return appendComponent(appendComponent(nil, cluster), namespace)
	case cluster != "":
		return appendComponent(nil, cluster)
	}
	return nil
}

// ParseKey is the inverse of Key.
func ParseKey(b []byte) (target.Key, error) {
	var parts [3]string
	rest := b
	for i := range parts {
		var buf []byte
		for {
			j := bytes.IndexByte(rest, escByte)
			if j < 0 || j+1 >= len(rest) {
				return target.Key{}, fmt.Errorf("%w %q", errBadKey, b)
			}
			buf = append(buf, rest[:j]...)
			switch rest[j+1] {
			case escNul:
				buf = append(buf, escByte)
				rest = rest[j+2:]
				continue
			case escTerm:
				rest = rest[j+2:]
			default:
				return target.Key{}, fmt.Errorf("%w %q", errBadKey, b)
			}
			break
		}
		parts[i] = string(buf)
	}
	if len(rest) != 0 {
		return target.Key{}, fmt.Errorf("%w %q", errBadKey, b)
	}
	return target.Key{Cluster: parts[0], Namespace: parts[1], Name: parts[2]}, nil
}

// OrderedTime maps t to a uint64 whose order is t's order, saturating
// outside the years 1678–2262 that Unix nanoseconds in an int64 can
// express; the zero time sorts first.
func OrderedTime(t time.Time) uint64 {
	var n int64
	switch {
	case t.IsZero(), t.Before(time.Unix(0, math.MinInt64)):
		n = math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	return uint64(n) ^ (1 << 63)
}

// DecisionKey is the decision-log key of the decision made at t by the
// target whose Key is rk: rk, then OrderedTime(t) in 8 bytes big-endian.
// A record key is never a proper prefix of another (its third terminator
// ends it), so rk is the prefix of exactly that target's log, which sorts
// by time.
func DecisionKey(rk []byte, t time.Time) []byte {
	b := make([]byte, len(rk), len(rk)+TimeLength)
	copy(b, rk)
	return binary.BigEndian.AppendUint64(b, OrderedTime(t))
}

// DecisionTime is the time of a DecisionKey, in UTC.
func DecisionTime(k []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[len(k)-TimeLength:])^(1<<63))).UTC()
}
