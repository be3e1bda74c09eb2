package record

import (
	"bytes"
	"sync"
	"time"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/target"
)

// maxRecent bounds the records written last that DecodeForDecision
// converts from the message they were encoded from (recent): about 6 KB
// each, 24 MB in all.
const maxRecent = 4096

// recent holds, for the targets whose records were encoded last
// (EncodeWrite), the storage message each was marshalled from, so that
// the next decision of such a target (DecodeForDecision of the same bytes)
// converts it without decompressing and unmarshalling the value again: a
// target decides every sync period, and its next decision reads what its
// last one wrote. The message is found by the target's key and used only
// when the value to decode is byte for byte the one it was encoded to;
// decoding is a function of the bytes, so a message found is what the
// bytes decode to, whichever store wrote them. The messages are never
// changed once kept and share nothing with a record (the conversion
// copies all it keeps, maps included).
var recent = recentRecords{byKey: map[target.Key]*recentRecord{}}

// recentRecords is a bounded map of recentRecord by target key; a random
// entry makes room for a new one.
type recentRecords struct {
	mu    sync.Mutex
	byKey map[target.Key]*recentRecord
}

// recentRecord is a record's storage message m, without its last decision
// (the change feed's entry took its parts), and the stored value it was
// encoded to.
type recentRecord struct {
	val    []byte
	m      *pb.Record
	last   bool // whether the record had a last decision: lastID and lastAt
	lastID string
	lastAt time.Time
}

// put keeps r for k, in place of what k had.
func (c *recentRecords) put(k target.Key, r *recentRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; !ok && len(c.byKey) >= maxRecent {
		for old := range c.byKey { // a random one: map order
			delete(c.byKey, old)
			break
		}
	}
	c.byKey[k] = r
}

// get returns what k has when it was encoded to val, or nil.
func (c *recentRecords) get(k target.Key, val []byte) *recentRecord {
	c.mu.Lock()
	r := c.byKey[k]
	c.mu.Unlock()
	if r == nil || !bytes.Equal(r.val, val) {
		return nil
	}
	return r
}

// forDecision is the record of k converted from r, as DecodeForDecision
// returns it.
func (r *recentRecord) forDecision(k target.Key) (target.Record, error) {
	rec, err := recordFromMessage(k, r.m, true)
	if err != nil || !r.last {
		return rec, err
	}
	rec.Last = &target.LastDecision{ID: r.lastID, At: r.lastAt}
	return rec, nil
}
