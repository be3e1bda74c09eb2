package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

func watchCmd(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	req := &setpointv1.WatchRequest{}
	fs.StringVar(&req.Cluster, "cluster", "", "only this cluster")
	fs.StringVar(&req.Namespace, "namespace", "", "only this namespace (requires --cluster)")
	fs.StringVar(&req.Name, "name", "", "only this autoscaler (requires --namespace)")
	fs.Uint64Var(&req.ResumeAfter, "resume-after", 0, "start after this revision (a REV printed before); 0: changes from now on")
	count := fs.Int("count", 0, "exit after this many changes; 0: follow until interrupted")
	out := outputFlag(fs, "table", "json")
	return func(ctx context.Context, e *env, _ []string) error {
		if err := checkFormat(*out, "table", "json"); err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var t *table
		if *out == "table" {
			t = newTable(e.stdout, "REV", "TIME", "TARGET", "CHANGE", "DETAIL")
			t.flush()
		}
		n := 0
		for ch, err := range e.client.Changes(ctx, req) {
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return nil // interrupted
				}
				return err
			}
			if t != nil {
				t.row(changeRow(ch)...)
				t.flush()
			} else {
				b, err := protojson.Marshal(ch)
				if err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, string(b))
			}
			if n++; *count > 0 && n >= *count {
				return nil
			}
		}
		return nil
	}
}

// changeRow is one change of Watch as a table row.
func changeRow(ch *setpointv1.WatchResponse) []string {
	row := []string{fmt.Sprint(ch.GetRevision()), "", keyString(ch.GetTarget()), "", ""}
	switch c := ch.GetChange().(type) {
	case *setpointv1.WatchResponse_Decision:
		row[1] = c.Decision.GetDecisionTime().AsTime().UTC().Format(time.RFC3339)
		row[3] = "decision"
		row[4] = summary(c.Decision)
	case *setpointv1.WatchResponse_Observation:
		row[1] = c.Observation.GetTime().AsTime().UTC().Format(time.RFC3339)
		row[3] = "observed " + c.Observation.GetKind()
		row[4] = fmt.Sprintf("%d → %d", c.Observation.GetFrom(), c.Observation.GetTo())
		if m := c.Observation.GetMessage(); m != "" {
			row[4] += ": " + m
		}
	case *setpointv1.WatchResponse_Deleted:
		row[1] = c.Deleted.GetTime().AsTime().UTC().Format(time.RFC3339)
		row[3] = "deleted"
	}
	return row
}
