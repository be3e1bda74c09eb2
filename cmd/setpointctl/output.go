package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// choice is a flag's value restricted to a list: a wrong one is a usage
// error naming the choices.
type choice struct {
	value   string
	allowed []string
}

func (c *choice) String() string { return c.value }
func (c *choice) Type() string   { return "string" }
func (c *choice) Set(v string) error {
	if !slices.Contains(c.allowed, v) {
		return fmt.Errorf("want one of %s", strings.Join(c.allowed, ", "))
	}
	c.value = v
	return nil
}

// outputFlag registers -o/--output with the formats allowed (the first is
// the default) and completes them.
func outputFlag(cmd *cobra.Command, formats ...string) *string {
	c := &choice{value: formats[0], allowed: formats}
	cmd.Flags().VarP(c, "output", "o", "output format: "+strings.Join(formats, ", "))
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
	return &c.value
}

// fileFlag registers -f/--filename, completed with file names.
func fileFlag(cmd *cobra.Command, usage string) *string {
	f := cmd.Flags().StringP("filename", "f", "", usage)
	cmd.MarkFlagFilename("filename", "json", "yaml", "yml")
	return f
}

// printMessage writes m as protojson ("json") or YAML ("yaml").
func printMessage(w io.Writer, format string, m proto.Message) error {
	// protojson varies its whitespace on purpose; indenting the compact
	// form gives output that is the same from run to run.
	compact, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, compact, "", "  "); err != nil {
		return err
	}
	b := buf.Bytes()
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// targetColumns are the columns of list and get, like kubectl get hpa's.
var targetColumns = []string{"TARGET", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "DESIRED", "LAST SEEN"}

// targetRow is one target as a row of targetColumns (wide: plus the last
// decision's explanation).
func targetRow(t *setpointv1.Target, now time.Time, wide bool) []string {
	spec, st := t.GetSpec(), t.GetStatus()
	ref := spec.GetScaleTargetRef()
	min := "1"
	if spec.MinReplicas != nil {
		min = fmt.Sprint(spec.GetMinReplicas())
	}
	row := []string{
		keyString(t.GetKey()),
		ref.GetKind() + "/" + ref.GetName(),
		metricsText(spec, st),
		min,
		fmt.Sprint(spec.GetMaxReplicas()),
		fmt.Sprint(st.GetCurrentReplicas()),
		fmt.Sprint(st.GetDesiredReplicas()),
		age(t.GetLastSeen().AsTime(), now),
	}
	if wide {
		row = append(row, summary(t.GetLastDecision()))
	}
	return row
}

func keyString(k *setpointv1.TargetKey) string {
	return k.GetCluster() + "/" + k.GetNamespace() + "/" + k.GetName()
}

// age formats how long ago t was, as kubectl does (5s, 3m, 2h, 4d).
func age(t, now time.Time) string {
	if t.IsZero() || t.Unix() == 0 {
		return "<unknown>"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// metricsText is each metric's current value over its target, as
// kubectl get hpa prints them ("87%/60%, 120/100").
func metricsText(spec *setpointv1.HorizontalPodAutoscalerSpec, st *setpointv1.HorizontalPodAutoscalerStatus) string {
	var parts []string
	for i, m := range spec.GetMetrics() {
		var cur *setpointv1.MetricValueStatus
		if i < len(st.GetCurrentMetrics()) {
			cur = currentValue(st.GetCurrentMetrics()[i])
		}
		parts = append(parts, valueText(cur, targetOf(m))+"/"+targetText(targetOf(m)))
	}
	return strings.Join(parts, ", ")
}

func targetOf(m *setpointv1.MetricSpec) *setpointv1.MetricTarget {
	switch m.GetType() {
	case "Resource":
		return m.GetResource().GetTarget()
	case "ContainerResource":
		return m.GetContainerResource().GetTarget()
	case "Pods":
		return m.GetPods().GetTarget()
	case "Object":
		return m.GetObject().GetTarget()
	case "External":
		return m.GetExternal().GetTarget()
	}
	return nil
}

func currentValue(m *setpointv1.MetricStatus) *setpointv1.MetricValueStatus {
	switch m.GetType() {
	case "Resource":
		return m.GetResource().GetCurrent()
	case "ContainerResource":
		return m.GetContainerResource().GetCurrent()
	case "Pods":
		return m.GetPods().GetCurrent()
	case "Object":
		return m.GetObject().GetCurrent()
	case "External":
		return m.GetExternal().GetCurrent()
	}
	return nil
}

func targetText(t *setpointv1.MetricTarget) string {
	switch t.GetType() {
	case "Utilization":
		return fmt.Sprintf("%d%%", t.GetAverageUtilization())
	case "AverageValue":
		return t.GetAverageValue() + " (avg)"
	case "Value":
		return t.GetValue()
	}
	return "<unknown>"
}

func valueText(v *setpointv1.MetricValueStatus, t *setpointv1.MetricTarget) string {
	switch {
	case v == nil:
		return "<unknown>"
	case t.GetType() == "Utilization" && v.AverageUtilization != nil:
		return fmt.Sprintf("%d%%", v.GetAverageUtilization())
	case t.GetType() == "AverageValue" && v.GetAverageValue() != "":
		return v.GetAverageValue()
	case v.GetValue() != "":
		return v.GetValue()
	}
	return "<unknown>"
}

// summary is a decision in one line: "2 → 3: cpu … proposed 3 (ratio 1.45)".
func summary(d *setpointv1.Decision) string {
	if d == nil {
		return "no decision yet"
	}
	e := d.GetExplanation()
	s := fmt.Sprintf("%d → %d", e.GetCurrentReplicas(), d.GetDesiredReplicas())
	if w := e.GetWinner(); w >= 0 && int(w) < len(e.GetMetrics()) {
		m := e.GetMetrics()[w]
		s += fmt.Sprintf(": %s proposed %d (ratio %.2f)", m.GetName(), m.GetProposal(), m.GetRatio())
	}
	for _, st := range e.GetSteps() {
		s += fmt.Sprintf("; %s %d→%d", st.GetKind(), st.GetFrom(), st.GetTo())
	}
	if d.GetError() != "" {
		s += "; error: " + d.GetError()
	}
	return s
}

// timeFormat is how tables print instants: RFC 3339 in UTC with
// milliseconds, as the conformance corpus writes them.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"
