package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"
)

func listCmd(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	req := &setpointv1.ListTargetsRequest{}
	fs.StringVar(&req.Cluster, "cluster", "", "only this cluster")
	fs.StringVar(&req.Namespace, "namespace", "", "only this namespace (requires --cluster)")
	out := outputFlag(fs, "table", "wide", "json", "yaml")
	return func(ctx context.Context, e *env, _ []string) error {
		if err := checkFormat(*out, "table", "wide", "json", "yaml"); err != nil {
			return err
		}
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
	}
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

func getCmd(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	out := outputFlag(fs, "table", "wide", "json", "yaml")
	return func(ctx context.Context, e *env, args []string) error {
		if err := checkFormat(*out, "table", "wide", "json", "yaml"); err != nil {
			return err
		}
		t, err := target(ctx, e, args[0])
		if err != nil {
			return err
		}
		if *out == "json" || *out == "yaml" {
			return printMessage(e.stdout, *out, t)
		}
		return printTargets(e, []*setpointv1.Target{t}, *out == "wide")
	}
}

func target(ctx context.Context, e *env, key string) (*setpointv1.Target, error) {
	k, err := setpointclient.ParseKey(key)
	if err != nil {
		return nil, err
	}
	return e.client.Target(ctx, k)
}

func explainCmd(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		t, err := target(ctx, e, args[0])
		if err != nil {
			return err
		}
		_, err = io.WriteString(e.stdout, explain(t))
		return err
	}
}

// explain tells a target's last decision in words.
func explain(t *setpointv1.Target) string {
	var b strings.Builder
	ref := t.GetSpec().GetScaleTargetRef()
	d := t.GetLastDecision()
	fmt.Fprintf(&b, "%s scales %s/%s between %d and %d replicas.\n", keyString(t.GetKey()), ref.GetKind(), ref.GetName(), minReplicas(t.GetSpec()), t.GetSpec().GetMaxReplicas())
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
		var spec *setpointv1.MetricSpec
		if i < len(t.GetSpec().GetMetrics()) {
			spec = t.GetSpec().GetMetrics()[i]
		}
		fmt.Fprintf(&b, "  - %s: %s", m.GetName(), metricWords(m, targetOf(spec).GetType() == "Utilization"))
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
	}
	return kind
}

func historyCmd(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	out := outputFlag(fs, "table", "json", "yaml")
	decisions := fs.Bool("decisions", false, "print the decision log (every decision kept, its inputs and what limited it) instead")
	since := fs.Duration("since", 0, "with --decisions: only decisions of this last duration (0: all kept)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := checkFormat(*out, "table", "json", "yaml"); err != nil {
			return err
		}
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
	}
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
	for _, r := range h.GetRecommendations() {
		lines = append(lines, line{stamp(r.GetTime()), []string{"recommendation", fmt.Sprint(r.GetReplicas()), "", ""}})
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
	return tb.flush()
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

func outdated(s *setpointv1.ScaleEvent) string {
	if s.GetOutdated() {
		return "outside every policy period"
	}
	return ""
}

func recommendCmd(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	file := fs.String("f", "", "RecommendRequest in protojson or YAML; - reads stdin")
	out := outputFlag(fs, "json", "yaml")
	return func(ctx context.Context, e *env, _ []string) error {
		if err := checkFormat(*out, "json", "yaml"); err != nil {
			return err
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
	}
}

func deleteCmd(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		k, err := setpointclient.ParseKey(args[0])
		if err != nil {
			return err
		}
		if _, err := e.client.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: k}); err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "target %s deleted\n", args[0])
		return err
	}
}

// readMessage reads a protojson or YAML message from path ("-": stdin).
func readMessage(stdin io.Reader, path string, m proto.Message) error {
	var (
		b   []byte
		err error
	)
	switch path {
	case "":
		return errors.New("-f FILE is required")
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
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
