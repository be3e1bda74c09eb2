package store

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/setpointhq/setpoint/target"
)

// exactRecord compares records as reflect.DeepEqual does, but floats by
// their bits (NaN equals the same NaN, -0 differs from +0) and times as
// values (location and monotonic reading included).
var exactRecord = gocmp.Options{
	gocmp.Comparer(func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }),
	gocmp.Comparer(func(a, b time.Time) bool { return a == b }),
}

// FuzzWireReader checks the record reader (codec_read.go) against the
// generated message path it replaced (decodeMessage), for a decision and
// not: the fuzzer's bytes as a stored message (decompressed when they are
// a compressed value), the message of a record built from them
// (recordGen), which the reader must read itself, and that message
// followed by the bytes (fields again, merged, or bytes that do not
// parse). Whatever the reader reads must be what the generated path
// decodes, exactly, and what the generated path refuses it must leave to
// it; decodeRecordFor must give the generated path's record or error.
func FuzzWireReader(f *testing.F) {
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{1}, 64))
	f.Add(bytes.Repeat([]byte{3, 7, 1, 200, 2}, 80))
	for _, dir := range []string{"FuzzDecodeRecord", "FuzzRecordCodec"} {
		for _, seed := range corpusSeeds(f, dir) {
			f.Add(seed)
		}
	}
	k := target.Key{Cluster: "c", Namespace: "n", Name: "x"}
	f.Fuzz(func(t *testing.T, b []byte) {
		msg := b
		if m, err := decompressValue(b); err == nil {
			msg = m
		}
		sameAsGenerated(t, k, msg, false)
		rec := (&recordGen{b: b}).record()
		enc, err := appendRecord(nil, &rec)
		if err != nil {
			return
		}
		sameAsGenerated(t, k, enc, true)
		sameAsGenerated(t, k, append(enc, b...), false)
	})
}

// corpusSeeds returns the []byte seeds of the fuzz target dir's corpus in
// testdata/fuzz.
func corpusSeeds(f *testing.F, dir string) [][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", dir, "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no corpus in testdata/fuzz/%s: %v", dir, err)
	}
	var seeds [][]byte
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		lit, ok := strings.CutPrefix(lines[len(lines)-1], "[]byte(")
		lit, ok2 := strings.CutSuffix(lit, ")")
		s, err := strconv.Unquote(lit)
		if len(lines) != 2 || lines[0] != "go test fuzz v1" || !ok || !ok2 || err != nil {
			f.Fatalf("%s is not a corpus file of one []byte", name)
		}
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// sameAsGenerated checks the reader on msg, a stored message, against the
// generated path, and decodeRecordFor with them; mustRead says the reader
// must read msg itself.
func sameAsGenerated(t *testing.T, k target.Key, msg []byte, mustRead bool) {
	t.Helper()
	for _, forDecision := range []bool{false, true} {
		want, wantErr := decodeMessage(k, msg, forDecision)
		got, ok := readRecord(k, msg, forDecision)
		switch {
		case !ok && mustRead:
			t.Fatalf("forDecision %v: the reader left the encoder's bytes to the generated path:\n%x", forDecision, msg)
		case ok && wantErr != nil:
			t.Fatalf("forDecision %v: the reader read what the generated path refuses (%v):\n%x", forDecision, wantErr, msg)
		case ok:
			if diff := gocmp.Diff(want, got, exactRecord); diff != "" {
				t.Fatalf("forDecision %v: (-generated +reader):\n%s\nof\n%x", forDecision, diff, msg)
			}
		}
		if len(msg) > 0 && (msg[0] == s2Value || msg[0] == deflateValue) {
			continue // decodeRecordFor would decompress it
		}
		got, err := decodeRecordFor(k, msg, forDecision)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("forDecision %v: decodeRecordFor error %v, the generated path's %v", forDecision, err, wantErr)
		}
		if diff := gocmp.Diff(want, got, exactRecord); diff != "" {
			t.Fatalf("forDecision %v: decodeRecordFor (-generated +decodeRecordFor):\n%s", forDecision, diff)
		}
	}
}

// TestWireReaderEdgeCases checks, for a decision and not, which messages
// the reader reads itself, which it leaves to the generated path, and
// which fail, and that decodeRecordFor gives the generated path's record
// or error for each.
func TestWireReaderEdgeCases(t *testing.T) {
	const (
		read      = "read"      // by the reader
		generated = "generated" // left to the generated path, which decodes it
		corrupt   = "corrupt"   // left to the generated path, which fails
	)
	rec, _ := statusRecord()
	base, err := appendRecord(nil, &rec)
	if err != nil {
		t.Fatal(err)
	}
	join := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	msg := func(num protowire.Number, fields ...[]byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), join(fields...))
	}
	str := func(num protowire.Number, s string) []byte { return msg(num, []byte(s)) }
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	neg := func(v int64) uint64 { return uint64(v) }
	cond := func(typ string) []byte { return join(str(1, typ), str(2, "True"), msg(5, varint(1, 1e9))) }
	// A record whose status has conditions A and B, and a last decision
	// whose Before holds the refs and own conditions given.
	withBefore := func(before ...[]byte) []byte {
		return join(msg(4, msg(5, cond("A")), msg(5, cond("B"))), msg(6, str(1, "d"), msg(4, before...)))
	}
	selector := func(entries ...[]byte) []byte {
		return msg(2, msg(3, msg(4, str(1, "rps"), msg(2, entries...))))
	}
	tests := []struct {
		name string
		msg  []byte
		want [2]string // not for a decision, for a decision
	}{
		{"the encoder's bytes", base, [2]string{read, read}},
		{"empty", nil, [2]string{read, read}},
		{"a scalar field twice: the last wins", msg(2, varint(1, 1), varint(2, 5), varint(1, 2)), [2]string{read, read}},
		{"a repeated message in two runs", join(msg(7, str(1, "Applied")), msg(8, varint(1, 9)), msg(7, varint(2, 3))), [2]string{read, read}},
		{"a singular message twice is merged", join(msg(2, varint(1, 1)), msg(2, varint(2, 9))), [2]string{generated, generated}},
		{"a timestamp twice is merged", join(msg(8, varint(1, 5)), msg(8, varint(2, 7))), [2]string{generated, generated}},
		{"an optional int32 twice: the last wins", msg(4, msg(4, varint(8, 0), varint(8, 85))), [2]string{read, read}},
		{"an absent optional int32", msg(4, msg(4, str(1, "Resource"))), [2]string{read, read}},
		{"condition refs unpacked", withBefore(varint(6, 1), varint(6, 0)), [2]string{read, read}},
		{"condition refs packed", withBefore(msg(6, []byte{1, 0})), [2]string{read, read}},
		{"condition refs packed and not, with an own condition", withBefore(msg(5, cond("C")), msg(6, []byte{1}), varint(6, neg(-1))), [2]string{read, read}},
		{"an empty packed run of condition refs", withBefore(msg(6), msg(5, cond("C"))), [2]string{read, read}},
		{"a condition ref out of range", withBefore(msg(6, []byte{2})), [2]string{corrupt, read}},
		{"an own condition without a ref", withBefore(msg(6, []byte{0}), msg(5, cond("C"))), [2]string{corrupt, read}},
		{"a packed ref that does not parse", msg(4, msg(6, []byte{0xff})), [2]string{corrupt, corrupt}},
		{"a string that is not UTF-8", msg(1, str(3, "web\xff")), [2]string{corrupt, corrupt}},
		{"a vocabulary string that is not UTF-8", msg(4, msg(5, str(1, "\xffAbleToScale"))), [2]string{corrupt, corrupt}},
		{"a map key that is not UTF-8", selector(msg(1, str(1, "app\xff"), str(2, "web"))), [2]string{corrupt, corrupt}},
		{"a repeated string that is not UTF-8", msg(2, msg(3, msg(4, msg(2, msg(2, str(3, "a"), str(3, "\xc3")))))), [2]string{corrupt, corrupt}},
		{"a map key twice: the last wins", selector(msg(1, str(1, "app"), str(2, "a")), msg(1, str(1, "app"), str(2, "b"))), [2]string{read, read}},
		{"a map entry without key or value", selector(msg(1), msg(1, str(2, "v")), msg(1, str(1, "k"))), [2]string{read, read}},
		{"an empty selector", selector(), [2]string{read, read}},
		{"not UTF-8 in the last decision but its ID", msg(6, str(1, "d"), msg(3, str(3, "\xff"))), [2]string{corrupt, read}},
		{"the last decision's ID not UTF-8", msg(6, str(1, "\xff")), [2]string{corrupt, corrupt}},
		{"the last decision twice", join(base, msg(6, str(1, "d2"))), [2]string{generated, generated}},
		{"the last decision as a varint", join(base, varint(6, 1)), [2]string{read, generated}},
		{"the last decision's time twice", msg(6, msg(2, varint(1, 1)), msg(2, varint(2, 2))), [2]string{generated, generated}},
		{"the last decision's from absent", msg(6, msg(3, msg(5, varint(1, 4)))), [2]string{read, read}},
		{"the decision's status is the record's", join(msg(4, varint(1, 3), msg(5, cond("A"))), msg(6, varint(5, 1), msg(3, msg(4, varint(1, 9))))), [2]string{read, read}},
		{"unknown fields", join(base, varint(99, 1), str(100, "x"), protowire.AppendFixed32(protowire.AppendTag(nil, 101, protowire.Fixed32Type), 1)), [2]string{read, read}},
		{"known numbers of another wire type", join(varint(1, 1), msg(4, protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), 7), varint(5, 3))), [2]string{read, read}},
		{"a double of another wire type", msg(3, varint(1, 1)), [2]string{read, read}},
		{"a group", join(base, protowire.AppendTag(nil, 20, protowire.StartGroupType), protowire.AppendTag(nil, 20, protowire.EndGroupType)), [2]string{generated, generated}},
		{"an end group alone", protowire.AppendTag(nil, 20, protowire.EndGroupType), [2]string{corrupt, corrupt}},
		{"truncated", base[:len(base)-1], [2]string{corrupt, corrupt}},
		{"a varint that does not end", []byte{0x10, 0xff, 0xff}, [2]string{corrupt, corrupt}},
		{"field number 0", []byte{0x02, 0x00}, [2]string{corrupt, corrupt}},
		{"a field number above 2²⁹-1", protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), [2]string{corrupt, corrupt}},
		{"a time after the year 9999", msg(8, varint(1, maxTimestampSeconds+1)), [2]string{corrupt, corrupt}},
		{"a time's nanos negative", msg(8, varint(2, neg(-1))), [2]string{corrupt, corrupt}},
		{"the last decision's time out of range", msg(6, msg(2, varint(1, neg(minTimestampSeconds-1)))), [2]string{corrupt, corrupt}},
		{"a duration beyond 10,000 years", msg(3, msg(2, varint(1, maxDurationSeconds+1))), [2]string{corrupt, corrupt}},
		{"a duration's nanos of the other sign", msg(3, msg(3, varint(1, 1), varint(2, neg(-1)))), [2]string{corrupt, corrupt}},
		{"the largest duration", msg(3, msg(4, varint(1, maxDurationSeconds), varint(2, 999999999))), [2]string{read, read}},
	}
	k := rec.Key
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, forDecision := range []bool{false, true} {
				want, wantErr := decodeMessage(k, tc.msg, forDecision)
				_, ok := readRecord(k, tc.msg, forDecision)
				got := generated
				if ok {
					got = read
				} else if wantErr != nil {
					got = corrupt
				}
				if got != tc.want[i] {
					t.Errorf("forDecision %v: %s, want %s (generated path's error: %v)", forDecision, got, tc.want[i], wantErr)
				}
				rec, err := decodeRecordFor(k, tc.msg, forDecision)
				var ce *CorruptError
				if wantErr != nil && (!errors.As(err, &ce) || err.Error() != wantErr.Error()) {
					t.Errorf("forDecision %v: decodeRecordFor error %v, want the generated path's %v", forDecision, err, wantErr)
				}
				if diff := gocmp.Diff(want, rec, exactRecord); diff != "" {
					t.Errorf("forDecision %v: decodeRecordFor (-generated +got):\n%s", forDecision, diff)
				}
			}
		})
	}
}
