package main

// setpointctl fleet: one autoscaler over a workload that runs in several
// member clusters (docs/fleets.md), as people and platforms see it.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/spf13/cobra"
)

// fleetArg is how commands name the fleet argument.
const fleetArg = "NAMESPACE/NAME"

func fleetCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "fleet",
		GroupID: "fleet",
		Short:   "Fleets: one autoscaler over a workload in several clusters",
		Long: `A fleet is one autoscaler for a workload that runs in several member
clusters: one spec (min/max of the total, metrics, behavior), one decision
over the pods and metrics of every member, one history, and the total
split among the members by weight (docs/fleets.md). Each member cluster's
agent reports to the fleet and applies its member's share.

A fleet is named NAMESPACE/NAME: the namespace its workload runs in, in
every member cluster, and the fleet's name (e.g. shop/web).`,
		Example: `  setpointctl fleet put -f fleet.yaml
  setpointctl fleet list -o wide
  setpointctl fleet explain shop/web`,
		Args: noArgs,
		RunE: localRun(func(cmd *cobra.Command, _ []string) error { return cmd.Help() }),
	}
	for _, sub := range []*cobra.Command{
		fleetPutCmd(e), fleetGetCmd(e), fleetListCmd(e), fleetExplainCmd(e),
		fleetSimulateCmd(e), fleetDeleteCmd(e),
	} {
		cmd.AddCommand(sub)
	}
	return cmd
}

func fleetPutCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "put -f FILE",
		Short: "Create a fleet or replace its spec",
		Long: `Create a fleet or replace its spec, from a file in YAML or JSON: the
fleet's key and its spec (a PutFleetRequest):

  fleet: {namespace: shop, name: web}
  spec:
    autoscaler: {scaleTargetRef: ..., minReplicas: 2, maxReplicas: 20, metrics: [...]}
    members:
    - {cluster: eu, weight: 2}
    - {cluster: us, weight: 1, maxReplicas: 8}

The fleet's history and its members' latest reports carry across a change
of spec. Only an admin, or a platform identity that may read every member
cluster, may put a fleet (docs/security.md).`,
		Example: `  setpointctl fleet put -f cmd/setpointctl/testdata/fleet.yaml
  cat fleet.yaml | setpointctl fleet put -f - -o yaml`,
		Args: noArgs,
	}
	file := fileFlag(cmd, "the fleet (PutFleetRequest: fleet and spec) in YAML or JSON; - reads stdin")
	out := outputFlag(cmd, "table", "wide", "json", "yaml")
	cmd.RunE = serverRun(e, func(ctx context.Context, _ []string) error {
		if *file == "" {
			return usagef(cmd, "fleet put needs -f FILE, the fleet to put (YAML or JSON; - reads stdin), e.g. %s", exampleOf(cmd))
		}
		req := &setpointv1.PutFleetRequest{}
		if err := readMessage(e.stdin, *file, req); err != nil {
			return err
		}
		resp, err := e.client.PutFleet(ctx, req)
		if err != nil {
			return err
		}
		if *out == "json" || *out == "yaml" {
			return printMessage(e.stdout, *out, resp.GetFleet())
		}
		return printFleets(e, []*setpointv1.Fleet{resp.GetFleet()}, *out == "wide")
	})
	return cmd
}

func fleetGetCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get " + fleetArg,
		Short: "Show one fleet",
		Long: `Show one fleet as a row of fleet list (-o wide adds the split: each
member's share and reason, and the total), or everything the service keeps
of it (spec, status, last decision, history, split, members) with -o json
or -o yaml.`,
		Example: `  setpointctl fleet get shop/web -o wide
  setpointctl fleet get shop/web -o yaml`,
		Args:              exactArgs(1, "one fleet, "+fleetArg),
		ValidArgsFunction: e.completeFleets,
	}
	out := outputFlag(cmd, "table", "wide", "json", "yaml")
	cmd.RunE = serverRun(e, func(ctx context.Context, args []string) error {
		f, err := fleet(ctx, e, args[0])
		if err != nil {
			return err
		}
		if *out == "json" || *out == "yaml" {
			return printMessage(e.stdout, *out, f)
		}
		return printFleets(e, []*setpointv1.Fleet{f}, *out == "wide")
	})
	return cmd
}

func fleet(ctx context.Context, e *env, key string) (*setpointv1.Fleet, error) {
	k, err := setpointclient.ParseFleetKey(key)
	if err != nil {
		return nil, err
	}
	return e.client.Fleet(ctx, k)
}

func fleetListCmd(e *env) *cobra.Command {
	req := &setpointv1.ListFleetsRequest{}
	cmd := &cobra.Command{
		Use:   "list [--namespace N]",
		Short: "List the fleets the service keeps",
		Long: `List the fleets you may read: the workload each scales, current over
target metric values, the replica limits of the total, how many members
were pooled in the last decision, the current and desired totals, and when
the fleet was last put or reported to. -o wide adds the split: each
member's share and why, and the total divided.`,
		Example: `  setpointctl fleet list
  setpointctl fleet list --namespace shop -o wide`,
		Args: noArgs,
	}
	cmd.Flags().StringVar(&req.Namespace, "namespace", "", "only this namespace")
	out := outputFlag(cmd, "table", "wide", "json", "yaml")
	cmd.RunE = serverRun(e, func(ctx context.Context, _ []string) error {
		all := &setpointv1.ListFleetsResponse{}
		for f, err := range e.client.Fleets(ctx, req) {
			if err != nil {
				return err
			}
			all.Fleets = append(all.Fleets, f)
		}
		if *out == "json" || *out == "yaml" {
			return printMessage(e.stdout, *out, all)
		}
		return printFleets(e, all.GetFleets(), *out == "wide")
	})
	return cmd
}

func fleetExplainCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain " + fleetArg,
		Short: "Tell a fleet's last decision and split in words",
		Long: `Tell a fleet's last decision in words, as explain does for a target (what
each metric proposed over the pooled members' pods, which proposal won,
every step that moved the number, the conditions), then the split: each
member's share, why (its quota by weight, its min or max, held or
returning), and why members were left out of the pool.`,
		Example:           `  setpointctl fleet explain shop/web`,
		Args:              exactArgs(1, "one fleet, "+fleetArg),
		ValidArgsFunction: e.completeFleets,
	}
	cmd.RunE = serverRun(e, func(ctx context.Context, args []string) error {
		f, err := fleet(ctx, e, args[0])
		if err != nil {
			return err
		}
		_, err = io.WriteString(e.stdout, explainFleet(f, e.now()))
		return err
	})
	return cmd
}

func fleetSimulateCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "simulate -f FILE [--seed-from " + fleetArg + "]",
		Short: "What-if: run the members' reports through a fleet, store nothing",
		Long: `Ask what a fleet would do over a series of steps (a SimulateFleetRequest in
JSON or YAML: a fleet spec, and at each step the reports of some members,
as their agents send them) and print the fleet's decision, conditions and
split at every step. A member without a report at a step keeps its last
one, which ages until it is left out (the spec's staleAfter); a report
without a scale takes the member's share of the previous step. Nothing is
stored; --seed-from starts from a stored fleet's history, status and
members' states.`,
		Example: `  setpointctl fleet simulate -f cmd/setpointctl/testdata/fleet-simulate.json -o wide
  setpointctl fleet simulate -f what-if.yaml --seed-from shop/web`,
		Args: noArgs,
	}
	file := fileFlag(cmd, "SimulateFleetRequest in protojson or YAML; - reads stdin")
	seed := cmd.Flags().String("seed-from", "", "start from this stored fleet's history, status and members ("+fleetArg+"; replaces the file's seedFrom)")
	cmd.RegisterFlagCompletionFunc("seed-from", e.completeFleets)
	out := outputFlag(cmd, "table", "wide", "json", "yaml")
	cmd.RunE = serverRun(e, func(ctx context.Context, _ []string) error {
		if *file == "" {
			return usagef(cmd, "fleet simulate needs -f FILE, the SimulateFleetRequest to run (JSON or YAML; - reads stdin), e.g. %s", exampleOf(cmd))
		}
		var seedFrom *setpointv1.FleetKey
		if *seed != "" {
			k, err := setpointclient.ParseFleetKey(*seed)
			if err != nil {
				return err
			}
			seedFrom = k
		}
		req := &setpointv1.SimulateFleetRequest{}
		if err := readMessage(e.stdin, *file, req); err != nil {
			return err
		}
		if seedFrom != nil {
			req.SeedFrom = seedFrom
		}
		resp, err := e.client.SimulateFleet(ctx, req)
		if err != nil {
			return err
		}
		if *out == "json" || *out == "yaml" {
			return printMessage(e.stdout, *out, resp)
		}
		return printFleetSimulation(e.stdout, resp.GetSteps(), *out == "wide")
	})
	return cmd
}

// printFleetSimulation writes a fleet simulation's step table: the
// decision's columns as simulate prints them, then how many members were
// pooled and the split.
func printFleetSimulation(w io.Writer, results []*setpointv1.SimulateFleetStepResult, wide bool) error {
	steps := make([]simStep, len(results))
	for i, r := range results {
		s := simStepOf(&setpointv1.SimulateStepResult{Time: r.GetTime(), Decision: r.GetDecision()})
		if r.GetError() != "" {
			s.Failed = true
			s.Why = strings.TrimPrefix(s.Why+"; no decision: "+r.GetError(), "; ")
		}
		n := 0
		for _, m := range r.GetMembers() {
			if m.GetPooled() {
				n++
			}
		}
		s.Extra = []string{fmt.Sprintf("%d/%d", n, len(r.GetMembers())), totalText(r.GetSplit()), sharesText(r.GetSplit())}
		steps[i] = s
	}
	return printSimulationWith(w, steps, wide, "POOLED", "TOTAL", "SHARES")
}

func fleetDeleteCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "delete " + fleetArg,
		Short:             "Forget a fleet, its history and its members' reports",
		Example:           `  setpointctl fleet delete shop/web`,
		Args:              exactArgs(1, "one fleet, "+fleetArg),
		ValidArgsFunction: e.completeFleets,
	}
	cmd.RunE = serverRun(e, func(ctx context.Context, args []string) error {
		k, err := setpointclient.ParseFleetKey(args[0])
		if err != nil {
			return err
		}
		if _, err := e.client.DeleteFleet(ctx, &setpointv1.DeleteFleetRequest{Fleet: k}); err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "fleet %s deleted\n", args[0])
		return err
	})
	return cmd
}

// fleetColumns are the columns of fleet list and fleet get.
var fleetColumns = []string{"FLEET", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "POOLED", "REPLICAS", "DESIRED", "LAST SEEN"}

func printFleets(e *env, fleets []*setpointv1.Fleet, wide bool) error {
	cols := fleetColumns
	if wide {
		cols = append(cols[:len(cols):len(cols)], "TOTAL", "SHARES", "LAST DECISION")
	}
	t := newTable(e.stdout, cols...)
	now := e.now()
	for _, f := range fleets {
		t.row(fleetRow(f, now, wide)...)
	}
	return t.flush()
}

// fleetRow is one fleet as a row of fleetColumns (wide: plus the split's
// total, the shares and the last decision).
func fleetRow(f *setpointv1.Fleet, now time.Time, wide bool) []string {
	spec, st := f.GetSpec().GetAutoscaler(), f.GetStatus()
	ref := spec.GetScaleTargetRef()
	row := []string{
		setpointclient.FleetKeyString(f.GetKey()),
		ref.GetKind() + "/" + ref.GetName(),
		metricsText(spec, st),
		fmt.Sprint(minReplicas(spec)),
		fmt.Sprint(spec.GetMaxReplicas()),
		fmt.Sprintf("%d/%d", pooled(f), len(f.GetSpec().GetMembers())),
		fmt.Sprint(st.GetCurrentReplicas()),
		fmt.Sprint(st.GetDesiredReplicas()),
		age(f.GetLastSeen().AsTime(), now),
	}
	if wide {
		row = append(row, totalText(f.GetSplit()), sharesText(f.GetSplit()), summary(f.GetLastDecision()))
	}
	return row
}

// pooled counts the members pooled in the fleet's last decision.
func pooled(f *setpointv1.Fleet) int {
	n := 0
	for _, m := range f.GetMembers() {
		if m.GetPooled() {
			n++
		}
	}
	return n
}

// totalText is a split's total, and what was placed when the members
// could not hold it.
func totalText(s *setpointv1.FleetSplit) string {
	switch {
	case s == nil:
		return ""
	case s.GetPlaced() != s.GetTotal():
		return fmt.Sprintf("%d (%d placed)", s.GetTotal(), s.GetPlaced())
	}
	return fmt.Sprint(s.GetTotal())
}

// sharesText is a split's shares in one line: "eu 5 (Held), us 5 (Held),
// ap 2 (Returning)"; an excluded member shows why it was left out.
func sharesText(s *setpointv1.FleetSplit) string {
	var out []string
	for _, sh := range s.GetShares() {
		if sh.GetReason() == "Excluded" {
			out = append(out, fmt.Sprintf("%s excluded (%s)", sh.GetMember(), sh.GetExclusion()))
			continue
		}
		out = append(out, fmt.Sprintf("%s %d (%s)", sh.GetMember(), sh.GetReplicas(), sh.GetReason()))
	}
	return strings.Join(out, ", ")
}

// explainFleet tells a fleet's last decision in words, as explain does for
// a target, then its split: each member's share and why, and why members
// were left out of the pool.
func explainFleet(f *setpointv1.Fleet, now time.Time) string {
	spec := f.GetSpec()
	var names []string
	for _, m := range spec.GetMembers() {
		names = append(names, m.GetCluster())
	}
	of := fmt.Sprintf("in total over %d members (%s)", len(names), strings.Join(names, ", "))
	var b strings.Builder
	b.WriteString(explainDecision("Fleet "+setpointclient.FleetKeyString(f.GetKey()), of, spec.GetAutoscaler(), spec.GetAutoscaler().GetForecast(), f.GetLastDecision()))
	b.WriteString("\n")
	b.WriteString(splitWords(spec, f.GetSplit(), f.GetMembers(), now))
	return b.String()
}

// splitWords tells a split and the members' pool: each member's share with
// its reason and sentence, then the members left out and why, then every
// member's latest report.
func splitWords(spec *setpointv1.FleetSpec, s *setpointv1.FleetSplit, members []*setpointv1.FleetMemberStatus, now time.Time) string {
	var b strings.Builder
	if s == nil {
		b.WriteString("It has not split a total among its members yet: each member keeps the replicas it has.\n")
	} else {
		fmt.Fprintf(&b, "At %s it split %s among its members:\n", s.GetTime().AsTime().UTC().Format(time.RFC3339), replicas(s.GetTotal()))
		for _, sh := range s.GetShares() {
			fmt.Fprintf(&b, "  - %s (%s): %s\n", sh.GetMember(), memberTerms(spec, sh.GetMember()), shareWords(sh))
		}
		if s.GetPlaced() != s.GetTotal() {
			fmt.Fprintf(&b, "The members' min and max place %d of the %d replicas.\n", s.GetPlaced(), s.GetTotal())
		}
		fmt.Fprintf(&b, "In short: %s.\n", strings.TrimSuffix(s.GetMessage(), "."))
	}
	var out []*setpointv1.FleetMemberStatus
	for _, m := range members {
		if !m.GetPooled() {
			out = append(out, m)
		}
	}
	switch {
	case len(members) == 0, s == nil: // no decision: no pool yet
	case len(out) == 0:
		b.WriteString("\nEvery member was pooled in the last decision.\n")
	default:
		b.WriteString("\nLeft out of the last decision's pool (their pods, metrics and replicas not counted):\n")
		for _, m := range out {
			fmt.Fprintf(&b, "  - %s (%s): %s\n", m.GetMember(), m.GetExclusion(), memberWhy(m))
		}
	}
	if len(members) > 0 {
		b.WriteString("\nMembers' latest reports:\n")
		t := newTable(&b, "  MEMBER", "POOLED", "REPORTED", "REPLICAS", "PODS", "SHARE", "NOTE")
		for _, m := range members {
			reported := "never"
			if m.GetLastReport() != nil {
				reported = age(m.GetLastReport().AsTime(), now) + " ago"
			}
			note := m.GetCannotScale()
			if note != "" {
				note = "cannot scale: " + note
			}
			if m.GetReturning() {
				note = strings.TrimPrefix(note+"; returning from exclusion", "; ")
			}
			t.row("  "+m.GetMember(), yesNo(m.GetPooled()), reported, fmt.Sprint(m.GetReplicas()), fmt.Sprint(m.GetPods()), fmt.Sprint(m.GetShare()), note)
		}
		t.flush()
	}
	return b.String()
}

// memberTerms is a member's place in the split as its spec gives it:
// "weight 2, max 8".
func memberTerms(spec *setpointv1.FleetSpec, member string) string {
	for _, m := range spec.GetMembers() {
		if m.GetCluster() != member {
			continue
		}
		terms := []string{fmt.Sprintf("weight %d", m.GetWeight())}
		if m.MinReplicas != nil {
			terms = append(terms, fmt.Sprintf("min %d", m.GetMinReplicas()))
		}
		if m.MaxReplicas != nil {
			terms = append(terms, fmt.Sprintf("max %d", m.GetMaxReplicas()))
		}
		return strings.Join(terms, ", ")
	}
	return "no longer in the spec"
}

// shareWords tells one member's share: its replicas and reason, then the
// split's sentence.
func shareWords(sh *setpointv1.FleetShare) string {
	if sh.GetReason() == "Excluded" {
		return fmt.Sprintf("no replicas (Excluded): %s.", strings.TrimSuffix(sh.GetMessage(), "."))
	}
	s := fmt.Sprintf("%s (%s", replicas(sh.GetReplicas()), sh.GetReason())
	if sh.GetWeighted() != sh.GetReplicas() {
		s += fmt.Sprintf(", weighted share %d", sh.GetWeighted())
	}
	return s + "): " + strings.TrimSuffix(sh.GetMessage(), ".") + "."
}

// memberWhy says why a member was left out.
func memberWhy(m *setpointv1.FleetMemberStatus) string {
	if m.GetMessage() != "" {
		return strings.TrimSuffix(m.GetMessage(), ".") + "."
	}
	switch m.GetExclusion() {
	case "NoReport":
		return "it has not reported yet."
	case "Stale":
		return "its latest report is older than the fleet's staleAfter."
	case "CannotScale":
		return "its agent reports it cannot scale: " + m.GetCannotScale() + "."
	}
	return "it was not pooled."
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// replicas says n replicas, in the singular for one.
func replicas(n int32) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}
