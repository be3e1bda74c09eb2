package record

import (
	"math"
	"slices"
	"time"

	"github.com/setpointhq/setpoint/engine"
	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/target"
)

// maxLoggedError bounds the error texts of a logged decision, in bytes.
const maxLoggedError = 256

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

// EncodeLogged returns the decision-log entry of last
// (setpoint.storage.v1.LoggedDecision): compact by design, metric names
// and step messages left out, the engine's vocabulary as small codes,
// error texts cut to a bounded length.
func EncodeLogged(last *target.LastDecision) ([]byte, error) {
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
	m.Metrics = mapArray(x.Metrics, func(me engine.MetricExplanation, out *pb.LoggedMetric) {
		c, w := code(outcomeCodes, string(me.Outcome))
		*out = pb.LoggedMetric{
			Outcome: c, OutcomeWord: w, Proposal: me.Proposal, Current: me.Current, Target: me.Target,
			ReadyPods: me.ReadyPods, UnreadyPods: me.UnreadyPods, MissingPods: me.MissingPods, IgnoredPods: me.IgnoredPods,
			Err: cut(me.Err, maxLoggedError),
		}
	})
	m.Steps = mapArray(x.Steps, func(st engine.Step, out *pb.LoggedStep) {
		k, kw := code(stepKindCodes, string(st.Kind))
		r, rw := code(reasonCodes, st.Reason)
		*out = pb.LoggedStep{Kind: k, KindWord: kw, From: st.From, To: st.To, Reason: r, ReasonWord: rw}
	})
	return m.MarshalVT()
}

// DecodeLogged is the inverse of EncodeLogged; at is the time from the
// entry's key (DecisionTime).
func DecodeLogged(at time.Time, b []byte) (target.LoggedDecision, error) {
	var m pb.LoggedDecision
	if err := m.UnmarshalVT(b); err != nil {
		return target.LoggedDecision{}, err
	}
	var d decoder
	out := target.LoggedDecision{
		At: at, DesiredReplicas: m.GetDesiredReplicas(), Rescale: m.GetRescale(), Error: d.s(m.GetErr()),
		Explanation: engine.Explanation{
			CurrentReplicas: m.GetCurrentReplicas(), Proposal: m.GetProposal(), Winner: int(m.GetWinnerPlusOne()) - 1,
		},
	}
	for _, me := range m.GetMetrics() {
		out.Explanation.Metrics = append(out.Explanation.Metrics, engine.MetricExplanation{
			Outcome:  engine.MetricOutcome(word(outcomeCodes, me.GetOutcome(), d.s(me.GetOutcomeWord()))),
			Proposal: me.GetProposal(), Current: me.GetCurrent(), Target: me.GetTarget(),
			ReadyPods: me.GetReadyPods(), UnreadyPods: me.GetUnreadyPods(), MissingPods: me.GetMissingPods(), IgnoredPods: me.GetIgnoredPods(),
			Err: d.s(me.GetErr()),
		})
	}
	for _, st := range m.GetSteps() {
		out.Explanation.Steps = append(out.Explanation.Steps, engine.Step{
			Kind: engine.StepKind(word(stepKindCodes, st.GetKind(), d.s(st.GetKindWord()))),
			From: st.GetFrom(), To: st.GetTo(),
			Reason: word(reasonCodes, st.GetReason(), d.s(st.GetReasonWord())),
		})
	}
	if d.err != nil {
		return target.LoggedDecision{}, d.err
	}
	return out, nil
}
