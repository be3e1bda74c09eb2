package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"
)

func listCmd(e *env) *cobra.Command {
	req := &setpointv1.ListTargetsRequest{}
	cmd := &cobra.Command{
		Use:     "list [--cluster C] [--namespace N]",
		GroupID: "read",
		Short:   "List the targets the service keeps",
		Long: `List the targets the service keeps, like kubectl get hpa: the workload
each scales, current over target metric values, the replica limits, the
current and desired replica counts, and when the agent last sent it.`,
		Example: `  setpointctl list
  setpointctl list --cluster prod --namespace shop -o wide
  setpointctl list -o yaml`,
		Args: noArgs,
	}
	cmd.Flags().StringVar(&req.Cluster, "cluster", "", "only this cluster")
	cmd.Flags().StringVar(&req.Namespace, "namespace", "", "only this namespace (with --cluster)")
	out := outputFlag(cmd, "table", "wide", "json", "yaml")
	cmd.RunE = serverRun(e, func(ctx context.Context, _ []string) error {
		all := &setpointv1.ListTargetsResponse{}
		for t, err := range e.client.Targets(ctx, req) {
			if err != nil {
				return err
			}
			all.Targets = append(all.Targets, t)
		}
		if *out == "json" || *out == "yaml" {
			return printMessage(e.stdout, *out, all)
		}
		return printTargets(e, all.GetTargets(), *out == "wide")
	})
	return cmd
}

func printTargets(e *env, targets []*setpointv1.Target, wide bool) error {
	cols := targetColumns
	if wide {
		cols = append(cols[:len(cols):len(cols)], "LAST DECISION")
	}
	t := newTable(e.stdout, cols...)
	now := e.now()
	for _, tg := range targets {
		t.row(targetRow(tg, now, wide)...)
	}
	return t.flush()
}

// keyArg is how commands name the target argument.
const keyArg = "CLUSTER/NAMESPACE/NAME"

func getCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get " + keyArg,
		GroupID: "read",
		Short:   "Show one target",
		Long: `Show one target as a row of list, or everything the service keeps of it
(spec, status, last decision, history) with -o json or -o yaml.`,
		Example: `  setpointctl get dev/shop/web
  setpointctl get dev/shop/web -o yaml`,
		Args:              exactArgs(1, "one target, "+keyArg),
		ValidArgsFunction: e.completeTargets,
	}
	out := outputFlag(cmd, "table", "wide", "json", "yaml")
	cmd.RunE = serverRun(e, func(ctx context.Context, args []string) error {
		t, err := target(ctx, e, args[0])
		if err != nil {
			return err
		}
		if *out == "json" || *out == "yaml" {
			return printMessage(e.stdout, *out, t)
		}
		return printTargets(e, []*setpointv1.Target{t}, *out == "wide")
	})
	return cmd
}

func target(ctx context.Context, e *env, key string) (*setpointv1.Target, error) {
	k, err := setpointclient.ParseKey(key)
	if err != nil {
		return nil, err
	}
	return e.client.Target(ctx, k)
}

func explainCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "explain " + keyArg,
		GroupID: "read",
		Short:   "Tell a target's last decision in words",
		Long: `Tell a target's last decision in words: what each metric proposed, which
proposal won, every step that moved the number (tolerance, stabilization,
scaling policies, replica limits), and the conditions kubectl describe hpa
would show.`,
		Example:           `  setpointctl explain dev/shop/web`,
		Args:              exactArgs(1, "one target, "+keyArg),
		ValidArgsFunction: e.completeTargets,
	}
	cmd.RunE = serverRun(e, func(ctx context.Context, args []string) error {
		t, err := target(ctx, e, args[0])
		if err != nil {
			return err
		}
		_, err = io.WriteString(e.stdout, explain(t))
		return err
	})
	return cmd
}

// explain tells a target's last decision in words.
func explain(t *setpointv1.Target) string {
	return explainDecision(keyString(t.GetKey()), "", t.GetSpec(), t.GetReceivedSpec().GetForecast(), t.GetLastDecision())
}

// explainDecision tells an autoscaler's last decision d in words: name
// scales spec's workload (of, when set, says over what: "in total over 3
// members"), its forecast settings, what each metric proposed, the steps
// and the conditions.
func explainDecision(name, of string, spec *setpointv1.HorizontalPodAutoscalerSpec, forecast *setpointv1.Forecast, d *setpointv1.Decision) string {
	var b strings.Builder
	ref := spec.GetScaleTargetRef()
	if of != "" {
		of = " " + of
	}
	fmt.Fprintf(&b, "%s scales %s/%s between %d and %d replicas%s.\n", name, ref.GetKind(), ref.GetName(), minReplicas(spec), spec.GetMaxReplicas(), of)
	if forecast != nil {
		b.WriteString(forecastWords(forecast))
	}
	if d == nil {
		b.WriteString("It has no decision yet.\n")
		return b.String()
	}
	e := d.GetExplanation()
	when := d.GetDecisionTime().AsTime().UTC().Format(time.RFC3339)
	switch {
	case d.GetRescale():
		fmt.Fprintf(&b, "At %s it decided to scale from %d to %d replicas.\n", when, e.GetCurrentReplicas(), d.GetDesiredReplicas())
	default:
		fmt.Fprintf(&b, "At %s it decided to keep %d replicas.\n", when, d.GetDesiredReplicas())
	}
	if d.GetError() != "" {
		fmt.Fprintf(&b, "The decision reported an error: %s.\n", d.GetError())
	}
	if len(e.GetMetrics()) > 0 {
		b.WriteString("\nWhat each metric proposed:\n")
	}
	for i, m := range e.GetMetrics() {
		var ms *setpointv1.MetricSpec
		if i < len(spec.GetMetrics()) {
			ms = spec.GetMetrics()[i]
		}
		fmt.Fprintf(&b, "  - %s: %s", m.GetName(), metricWords(m, targetOf(ms).GetType() == "Utilization"))
		if int32(i) == e.GetWinner() {
			b.WriteString(" This is the largest proposal: it was used.")
		}
		b.WriteString("\n")
	}
	if e.GetWinner() >= 0 {
		fmt.Fprintf(&b, "\nThe metrics proposed %d replicas.", e.GetProposal())
	}
	if len(e.GetSteps()) == 0 {
		fmt.Fprintf(&b, " Nothing held the proposal back: the decision is %d.\n", d.GetDesiredReplicas())
	} else {
		b.WriteString(" Then:\n")
		for _, s := range e.GetSteps() {
			fmt.Fprintf(&b, "  - %s, %d → %d (%s): %s\n", stepWords(s.GetKind()), s.GetFrom(), s.GetTo(), s.GetReason(), s.GetMessage())
		}
	}
	if conds := d.GetStatus().GetConditions(); len(conds) > 0 {
		b.WriteString("\nConditions, as kubectl describe hpa shows them:\n")
		for _, c := range conds {
			fmt.Fprintf(&b, "  %s=%s (%s): %s\n", c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage())
		}
	}
	return b.String()
}

// forecastWords tells a spec's forecast settings.
func forecastWords(f *setpointv1.Forecast) string {
	lead := "the pods' start-up as the agent measures it, plus 15s"
	if f.GetLeadTime() != nil {
		lead += fmt.Sprintf("; %s while not measured", f.GetLeadTime().AsDuration())
	}
	maxErr := 0.15
	if f.GetMaxError() > 0 {
		maxErr = f.GetMaxError()
	}
	return fmt.Sprintf("It forecasts its metrics one lead time ahead (%s), silent while the forecast's backtest error is above %.0f%%.\n", lead, 100*maxErr)
}

func minReplicas(s *setpointv1.HorizontalPodAutoscalerSpec) int32 {
	if s.MinReplicas == nil {
		return 1
	}
	return s.GetMinReplicas()
}

// metricWords tells one metric's proposal.
func metricWords(m *setpointv1.MetricExplanation, percent bool) string {
	pods := fmt.Sprintf("%d ready pods", m.GetReadyPods())
	if n := m.GetUnreadyPods(); n > 0 {
		pods += fmt.Sprintf(", %d not yet ready", n)
	}
	if n := m.GetMissingPods(); n > 0 {
		pods += fmt.Sprintf(", %d without metrics", n)
	}
	if n := m.GetIgnoredPods(); n > 0 {
		pods += fmt.Sprintf(", %d ignored", n)
	}
	switch m.GetOutcome() {
	case "Failed":
		return fmt.Sprintf("could not be computed (%s).", m.GetError())
	case "WithinTolerance":
		return fmt.Sprintf("usage ratio %.2f is within the tolerance, so it proposed to stay at %d (%s).", m.GetRatio(), m.GetProposal(), pods)
	case "Rebalanced", "RebalanceHeld":
		return fmt.Sprintf("usage ratio %.2f, %.2f once pods without a usable sample were counted conservatively; proposed %d (%s).", m.GetRatio(), m.GetRebalancedRatio(), m.GetProposal(), pods)
	case "FromZero":
		return fmt.Sprintf("the target was at zero; proposed %d.", m.GetProposal())
	}
	return fmt.Sprintf("usage ratio %.2f (current %s over target %s), so it proposed %d (%s).", m.GetRatio(), milli(m.GetCurrent(), percent), milli(m.GetTarget(), percent), m.GetProposal(), pods)
}

// milli formats a value as the explanation carries it: a percentage, or a
// milli-value.
func milli(v int64, percent bool) string {
	if percent {
		return fmt.Sprintf("%d%%", v)
	}
	if v%1000 == 0 {
		return fmt.Sprint(v / 1000)
	}
	return fmt.Sprintf("%dm", v)
}

func stepWords(kind string) string {
	switch kind {
	case "Stabilized":
		return "held back by the stabilization window"
	case "Limited":
		return "limited by a scaling policy"
	case "CurrentAboveMax":
		return "the current count is above maxReplicas"
	case "CurrentBelowMin":
		return "the current count is below minReplicas"
	case "ScalingDisabled":
		return "scaling is disabled"
	case "MinFromZero":
		return "scaling up from zero"
	case "Proposal":
		return "raised by a proposal from outside the metrics"
	}
	return kind
}

func historyCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "history " + keyArg,
		GroupID: "read",
		Short:   "Show a target's recommendations, scale events and observed events",
		Long: `Show what the service remembers of a target, oldest first: the
recommendations the stabilization windows look back on, the scale events
the scaling policies count, and what the agent observed.

A target's history starts with two recommendations a moment apart: like
the Kubernetes HPA controller, the service seeds a new target's history
with the replica count it had, then adds its own recommendation, so that a
scale down is stabilized against where the target started.

With --decisions it prints the decision log instead: every decision kept
(see the server's -decision-retention), its replicas, each metric's current
value, target and proposal, the pod counts, and the step that limited it.`,
		Example: `  setpointctl history dev/shop/web
  setpointctl history dev/shop/web -o json
  setpointctl history dev/shop/web --decisions --since 1h`,
		Args:              exactArgs(1, "one target, "+keyArg),
		ValidArgsFunction: e.completeTargets,
	}
	out := outputFlag(cmd, "table", "json", "yaml")
	decisions := cmd.Flags().Bool("decisions", false, "print the decision log (every decision kept, its inputs and what limited it) instead")
	since := cmd.Flags().Duration("since", 0, "with --decisions: only decisions of this last duration (0: all kept)")
	cmd.RunE = serverRun(e, func(ctx context.Context, args []string) error {
		if *decisions {
			return decisionLog(ctx, e, args[0], *since, *out)
		}
		t, err := target(ctx, e, args[0])
		if err != nil {
			return err
		}
		if *out != "table" {
			return printMessage(e.stdout, *out, &setpointv1.Target{Key: t.GetKey(), History: t.GetHistory(), Events: t.GetEvents()})
		}
		return printHistory(e.stdout, t)
	})
	return cmd
}

// decisionLog prints key's decision log, every page, oldest first.
func decisionLog(ctx context.Context, e *env, key string, since time.Duration, format string) error {
	k, err := setpointclient.ParseKey(key)
	if err != nil {
		return err
	}
	req := &setpointv1.ListDecisionsRequest{Target: k, PageSize: setpointv1.MaxDecisionsPageSize}
	if since > 0 {
		req.StartTime = timestamppb.New(time.Now().Add(-since))
	}
	all := &setpointv1.ListDecisionsResponse{}
	for {
		resp, err := e.client.ListDecisions(ctx, req)
		if err != nil {
			return err
		}
		all.Decisions = append(all.Decisions, resp.GetDecisions()...)
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	if format != "table" {
		return printMessage(e.stdout, format, all)
	}
	tb := newTable(e.stdout, "TIME", "REPLICAS", "PROPOSAL", "METRICS (CURRENT/TARGET → PROPOSAL)", "PODS (READY/UNREADY/MISSING)", "LIMITED BY")
	for _, d := range all.GetDecisions() {
		x := d.GetExplanation()
		var metrics, pods []string
		for _, m := range x.GetMetrics() {
			if m.GetOutcome() == "Failed" {
				metrics = append(metrics, "failed")
			} else {
				metrics = append(metrics, fmt.Sprintf("%d/%d → %d", m.GetCurrent(), m.GetTarget(), m.GetProposal()))
			}
			pods = append(pods, fmt.Sprintf("%d/%d/%d", m.GetReadyPods(), m.GetUnreadyPods(), m.GetMissingPods()))
		}
		limited := "-"
		if st := x.GetSteps(); len(st) > 0 {
			last := st[len(st)-1]
			limited = fmt.Sprintf("%s (%d → %d)", last.GetReason(), last.GetFrom(), last.GetTo())
		}
		replicas := fmt.Sprintf("%d → %d", x.GetCurrentReplicas(), d.GetDesiredReplicas())
		if d.GetError() != "" {
			limited += "; error: " + d.GetError()
		}
		tb.row(d.GetDecisionTime().AsTime().UTC().Format(timeFormat), replicas, fmt.Sprint(x.GetProposal()),
			strings.Join(metrics, ", "), strings.Join(pods, ", "), limited)
	}
	return tb.flush()
}

// printHistory writes a target's history as one table, oldest first.
func printHistory(w io.Writer, t *setpointv1.Target) error {
	type line struct {
		at    time.Time
		cells []string
	}
	var lines []line
	stamp := func(ts interface{ AsTime() time.Time }) time.Time { return ts.AsTime().UTC() }
	h := t.GetHistory()
	seed := seedOf(h.GetRecommendations())
	for _, r := range h.GetRecommendations() {
		note := ""
		if r == seed {
			note = "seed: the replica count before the first decision (*)"
		}
		lines = append(lines, line{stamp(r.GetTime()), []string{"recommendation", fmt.Sprint(r.GetReplicas()), "", note}})
	}
	for _, s := range h.GetScaleUpEvents() {
		lines = append(lines, line{stamp(s.GetTime()), []string{"scale up", fmt.Sprintf("+%d", s.GetChange()), "", outdated(s)}})
	}
	for _, s := range h.GetScaleDownEvents() {
		lines = append(lines, line{stamp(s.GetTime()), []string{"scale down", fmt.Sprintf("-%d", s.GetChange()), "", outdated(s)}})
	}
	for _, ev := range t.GetEvents() {
		lines = append(lines, line{stamp(ev.GetTime()), []string{"observed " + ev.GetKind(), fmt.Sprintf("%d → %d", ev.GetFrom(), ev.GetTo()), ev.GetDecisionId(), ev.GetMessage()}})
	}
	// A stable sort keeps recommendations before events of the same instant.
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	tb := newTable(w, "TIME", "ENTRY", "REPLICAS", "DECISION", "NOTE")
	for _, l := range lines {
		tb.row(append([]string{l.at.Format(timeFormat)}, l.cells...)...)
	}
	if err := tb.flush(); err != nil {
		return err
	}
	if seed != nil {
		_, err := io.WriteString(w, seedNote)
		return err
	}
	return nil
}

// seedNote explains the seed recommendation.
const seedNote = `
(*) Two recommendations a moment apart start every target's history. Like
the Kubernetes HPA controller, the service first records the replica count
the target had when it was first seen (a nanosecond before the decision),
then its own recommendation, so that a scale down is stabilized against
where the target started.
`

// seedOf is the recommendation a history was seeded with, if it is still
// kept: the earliest, a nanosecond before the next (at most a
// millisecond, for records written by other versions).
func seedOf(recs []*setpointv1.Recommendation) *setpointv1.Recommendation {
	if len(recs) < 2 {
		return nil
	}
	sorted := slices.Clone(recs)
	slices.SortStableFunc(sorted, func(a, b *setpointv1.Recommendation) int { return a.GetTime().AsTime().Compare(b.GetTime().AsTime()) })
	if gap := sorted[1].GetTime().AsTime().Sub(sorted[0].GetTime().AsTime()); gap >= 0 && gap <= time.Millisecond {
		return sorted[0]
	}
	return nil
}

func outdated(s *setpointv1.ScaleEvent) string {
	if s.GetOutdated() {
		return "outside every policy period"
	}
	return ""
}

func recommendCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "recommend -f FILE",
		GroupID: "ask",
		Short:   "Send a RecommendRequest, as an agent does, and print the decision",
		Long: `Send a RecommendRequest (protojson or YAML), as an agent does, and print
the response: the decision, the status and the explanation. The decision is
recorded in the target's history.`,
		Example: `  setpointctl recommend -f testdata/examples/recommend.json
  cat request.yaml | setpointctl recommend -f - -o yaml`,
		Args: noArgs,
	}
	file := fileFlag(cmd, "RecommendRequest in protojson or YAML; - reads stdin")
	out := outputFlag(cmd, "json", "yaml")
	cmd.RunE = serverRun(e, func(ctx context.Context, _ []string) error {
		if *file == "" {
			return usagef(cmd, "recommend needs -f FILE, the RecommendRequest to send (JSON or YAML; - reads stdin), e.g. %s", exampleOf(cmd))
		}
		req := &setpointv1.RecommendRequest{}
		if err := readMessage(e.stdin, *file, req); err != nil {
			return err
		}
		resp, err := e.client.Recommend(ctx, req)
		if err != nil {
			return err
		}
		return printMessage(e.stdout, *out, resp)
	})
	return cmd
}

func deleteCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "delete " + keyArg,
		GroupID:           "ask",
		Short:             "Forget a target and its history",
		Example:           `  setpointctl delete dev/shop/web`,
		Args:              exactArgs(1, "one target, "+keyArg),
		ValidArgsFunction: e.completeTargets,
	}
	cmd.RunE = serverRun(e, func(ctx context.Context, args []string) error {
		k, err := setpointclient.ParseKey(args[0])
		if err != nil {
			return err
		}
		if _, err := e.client.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: k}); err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "target %s deleted\n", args[0])
		return err
	})
	return cmd
}

// readMessage reads a protojson or YAML message from path ("-": stdin).
func readMessage(stdin io.Reader, path string, m proto.Message) error {
	var (
		b   []byte
		err error
	)
	switch path {
	case "":
		return &usageError{msg: "-f FILE is required: the request to send (JSON or YAML; - reads stdin)"}
	case "-":
		b, err = io.ReadAll(stdin)
	default:
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return err
	}
	if j, err := yaml.YAMLToJSON(b); err == nil {
		b = j
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%s is not a %s in JSON or YAML: %w", path, m.ProtoReflect().Descriptor().Name(), err)
	}
	return nil
}
