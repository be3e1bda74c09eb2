package store

import "github.com/setpointhq/setpoint/target"

// DecodeRecordGenerated decodes a stored record through the generated
// message, as the store did before the record reader (codec_read.go),
// with forDecision as Decide does: the baseline
// of BenchmarkRecordCodec.
func DecodeRecordGenerated(k target.Key, b []byte, forDecision bool) (target.Record, error) {
	buf := getScratch()
	msg, err := decompressValueInto(*buf, b)
	if err != nil {
		return target.Record{}, &CorruptError{Key: k, Err: err}
	}
	if len(b) > 0 && b[0] == s2Value { // as decodeRecordFor
		defer putScratch(buf, msg)
	}
	return decodeMessage(k, msg, forDecision)
}
