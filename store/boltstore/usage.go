package boltstore

import (
	"context"

	"github.com/setpointhq/setpoint/store/boltstore/schema"
	bolt "go.etcd.io/bbolt"
)

// BucketUsage is the space one bucket of the file takes.
type BucketUsage struct {
	// Keys counts the bucket's key/value pairs.
	Keys int
	// InUse is the bytes its keys, values and page headers occupy.
	InUse int
	// Allocated is the bytes of the pages allocated to it.
	Allocated int
}

// Usage is the space the store's file takes, by bucket.
type Usage struct {
	// FileBytes is the size of the file, free pages included.
	FileBytes int64
	// Records, LastSeen, Changes and Decisions are the record, expiry
	// index, change feed and decision log buckets.
	Records, LastSeen, Changes, Decisions BucketUsage
	// FreePages counts the pages free for reuse.
	FreePages int
}

// Usage walks the file and reports the space each bucket takes. It reads
// every page of the file: a tool for measurement, not for a hot path.
func (b *Store) Usage(ctx context.Context) (Usage, error) {
	if err := ctx.Err(); err != nil {
		return Usage{}, err
	}
	var u Usage
	err := b.viewLatest(ctx, func(tx *bolt.Tx) error {
		u.FileBytes = tx.Size()
		for _, x := range []struct {
			name []byte
			out  *BucketUsage
		}{{schema.Records, &u.Records}, {schema.LastSeen, &u.LastSeen}, {schema.Changes, &u.Changes}, {schema.Decisions, &u.Decisions}} {
			bk := tx.Bucket(x.name)
			if bk == nil {
				continue
			}
			s := bk.Stats()
			*x.out = BucketUsage{Keys: s.KeyN, InUse: s.LeafInuse + s.BranchInuse, Allocated: s.LeafAlloc + s.BranchAlloc}
		}
		u.FreePages = b.db.Stats().FreePageN
		return nil
	})
	return u, err
}
