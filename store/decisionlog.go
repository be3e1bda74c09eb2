package store

// The decision log: a compact entry per decision in bucketDecisions, written
// in the transaction of the Update that made the decision, trimmed to
// Options.DecisionRetention by that same write, and removed with the target.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/target"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

// Defaults of the decision log.
const (
	// DefaultDecisionRetention is how long a decision stays in its target's
	// log by default: 720 decisions at a 15 s sync.
	DefaultDecisionRetention = 3 * time.Hour
	// DefaultDecisionsPageSize is the page size of a Decisions call whose
	// DecisionQuery.PageSize is 0.
	DefaultDecisionsPageSize = 500
	// MaxDecisionsPageSize is the largest page Decisions returns.
	MaxDecisionsPageSize = 5000
	// maxLoggedError bounds the error texts of a logged decision, in bytes.
	maxLoggedError = 256
)

// DecisionQuery selects part of one target's decision log.
type DecisionQuery struct {
	// From, when set, keeps decisions made at or after it.
	From time.Time
	// To, when set, keeps decisions made before it.
	To time.Time
	// PageSize is the most decisions returned; 0 means
	// DefaultDecisionsPageSize, more than MaxDecisionsPageSize is lowered.
	PageSize int
	// PageToken continues a previous Decisions call of the same query.
	PageToken string
}

// The engine's vocabulary as stored codes: a word's code is its index plus
// one; a word not listed is stored as itself with code 0. Append only: a
// code, once written, means its word forever.
var (
	outcomeCodes = []string{
		string(engine.OutcomeFailed), string(engine.OutcomeWithinTolerance), string(engine.OutcomeScaled),
		string(engine.OutcomeRebalanced), string(engine.OutcomeRebalanceHeld), string(engine.OutcomeFromZero),
	}
	stepKindCodes = []string{
		string(engine.StepScalingDisabled), string(engine.StepAboveMax), string(engine.StepBelowMin),
		string(engine.StepStabilized), string(engine.StepLimited), string(engine.StepMinFromZero),
	}
	reasonCodes = []string{
		"ScalingDisabled", "TooManyReplicas", "TooFewReplicas", "ScaleUpStabilized", "ScaleDownStabilized",
		"ScaleUpLimit", "ScaleDownLimit", "DesiredWithinRange",
	}
)

// code returns word's code in table and the word to store beside it.
func code(table []string, word string) (uint32, string) {
	if i := slices.Index(table, word); i >= 0 {
		return uint32(i + 1), ""
	}
	return 0, word
}

// word is the inverse of code.
func word(table []string, c uint32, w string) string {
	if c > 0 && int(c) <= len(table) {
		return table[c-1]
	}
	return w
}

// cut returns s cut to at most n bytes, on a UTF-8 boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// encodeLoggedDecision is the stored form of the decision last of rec.
func encodeLoggedDecision(last *target.LastDecision) ([]byte, error) {
	d, x := last.Decision, last.Decision.Explanation
	m := &pb.LoggedDecision{
		CurrentReplicas: x.CurrentReplicas,
		DesiredReplicas: d.DesiredReplicas,
		Rescale:         d.Rescale,
		Err:             cut(d.Error, maxLoggedError),
		Proposal:        x.Proposal,
	}
	if x.Winner >= 0 && x.Winner < math.MaxInt32 {
		m.WinnerPlusOne = int32(x.Winner + 1)
	}
	m.Metrics = mapMessages(x.Metrics, func(me engine.MetricExplanation, out *pb.LoggedMetric) {
		c, w := code(outcomeCodes, string(me.Outcome))
		*out = pb.LoggedMetric{
			Outcome: c, OutcomeWord: w, Proposal: me.Proposal, Current: me.Current, Target: me.Target,
			ReadyPods: me.ReadyPods, UnreadyPods: me.UnreadyPods, MissingPods: me.MissingPods, IgnoredPods: me.IgnoredPods,
			Err: cut(me.Err, maxLoggedError),
		}
	})
	m.Steps = mapMessages(x.Steps, func(st engine.Step, out *pb.LoggedStep) {
		k, kw := code(stepKindCodes, string(st.Kind))
		r, rw := code(reasonCodes, st.Reason)
		*out = pb.LoggedStep{Kind: k, KindWord: kw, From: st.From, To: st.To, Reason: r, ReasonWord: rw}
	})
	return proto.Marshal(m)
}

// decodeLoggedDecision is the inverse of encodeLoggedDecision, at is the
// time from the entry's key.
func decodeLoggedDecision(at time.Time, b []byte) (target.LoggedDecision, error) {
	var m pb.LoggedDecision
	if err := proto.Unmarshal(b, &m); err != nil {
		return target.LoggedDecision{}, err
	}
	out := target.LoggedDecision{
		At: at, DesiredReplicas: m.GetDesiredReplicas(), Rescale: m.GetRescale(), Error: m.GetErr(),
		Explanation: engine.Explanation{
			CurrentReplicas: m.GetCurrentReplicas(), Proposal: m.GetProposal(), Winner: int(m.GetWinnerPlusOne()) - 1,
		},
	}
	for _, me := range m.GetMetrics() {
		out.Explanation.Metrics = append(out.Explanation.Metrics, engine.MetricExplanation{
			Outcome:  engine.MetricOutcome(word(outcomeCodes, me.GetOutcome(), me.GetOutcomeWord())),
			Proposal: me.GetProposal(), Current: me.GetCurrent(), Target: me.GetTarget(),
			ReadyPods: me.GetReadyPods(), UnreadyPods: me.GetUnreadyPods(), MissingPods: me.GetMissingPods(), IgnoredPods: me.GetIgnoredPods(),
			Err: me.GetErr(),
		})
	}
	for _, st := range m.GetSteps() {
		out.Explanation.Steps = append(out.Explanation.Steps, engine.Step{
			Kind: engine.StepKind(word(stepKindCodes, st.GetKind(), st.GetKindWord())),
			From: st.GetFrom(), To: st.GetTo(),
			Reason: word(reasonCodes, st.GetReason(), st.GetReasonWord()),
		})
	}
	return out, nil
}

// timeOfOrdered is the inverse of orderedTime, in UTC.
func timeOfOrdered(u uint64) time.Time {
	return time.Unix(0, int64(u^(1<<63))).UTC()
}

// unsafeLogEncoded appends a decision made at `at`, encoded by
// encodeLoggedDecision as val (outside the transaction), to the log of the
// target whose record key is rk and removes that target's entries older
// than the retention, in tx (a held write transaction). The caller logs
// nothing when the retention is negative.
func (b *Bolt) unsafeLogEncoded(tx *bolt.Tx, rk []byte, at time.Time, val []byte) error {
	bucket := tx.Bucket(bucketDecisions)
	bucket.FillPercent = 1 // keys of one target arrive in time order: append-mostly
	cutoff := decisionKey(rk, at.Add(-b.opts.DecisionRetention))
	c := bucket.Cursor()
	for k, _ := c.Seek(rk); k != nil && bytes.HasPrefix(k, rk) && bytes.Compare(k, cutoff) < 0; k, _ = c.Seek(rk) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return bucket.Put(decisionKey(rk, at), val)
}

// unsafeForgetDecisions removes the whole log of the target whose record
// key is rk, in tx (a held write transaction).
func unsafeForgetDecisions(tx *bolt.Tx, rk []byte) error {
	c := tx.Bucket(bucketDecisions).Cursor()
	for k, _ := c.Seek(rk); k != nil && bytes.HasPrefix(k, rk); k, _ = c.Seek(rk) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// Decisions returns one page of key's decision log, oldest first, and the
// token of the next page (empty after the last one). A target without a
// log (unknown, or not decided within the retention) has an empty page. An
// entry that does not decode fails the call with a *CorruptError.
func (b *Bolt) Decisions(ctx context.Context, key target.Key, q DecisionQuery) ([]target.LoggedDecision, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	rk, err := recordKey(key)
	if err != nil {
		return nil, "", err
	}
	switch {
	case q.PageSize < 0:
		return nil, "", fmt.Errorf("%w: negative page size %d", ErrInvalid, q.PageSize)
	case q.PageSize == 0:
		q.PageSize = DefaultDecisionsPageSize
	case q.PageSize > MaxDecisionsPageSize:
		q.PageSize = MaxDecisionsPageSize
	}
	start := decisionKey(rk, q.From)
	if q.PageToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || len(raw) != tsLength {
			return nil, "", fmt.Errorf("%w: page token %q", ErrInvalid, q.PageToken)
		}
		start = append(slices.Clone(rk), raw...)
	}
	end := append(slices.Clone(rk), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	if !q.To.IsZero() {
		end = decisionKey(rk, q.To)
	}
	var out []target.LoggedDecision
	var next string
	err = b.viewLatest(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDecisions).Cursor()
		for k, v := c.Seek(start); k != nil && len(k) == len(rk)+tsLength && bytes.HasPrefix(k, rk) && bytes.Compare(k, end) < 0; k, v = c.Next() {
			if len(out) == q.PageSize {
				next = base64.RawURLEncoding.EncodeToString(k[len(rk):])
				return nil
			}
			d, err := decodeLoggedDecision(timeOfOrdered(binary.BigEndian.Uint64(k[len(rk):])), v)
			if err != nil {
				return &CorruptError{Key: key, Err: fmt.Errorf("decision log entry: %w", err)}
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}
