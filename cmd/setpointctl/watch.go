package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

func watchCmd(e *env) *cobra.Command {
	req := &setpointv1.WatchRequest{}
	cmd := &cobra.Command{
		Use:     "watch [--cluster C] [--namespace N] [--name NAME]",
		GroupID: "read",
		Short:   "Follow decisions, observations and deletions as they happen",
		Long: `Follow decisions, observations and deletions as the service records them,
one row each. When the server goes away, watch says so on stderr and
reconnects by itself, resuming after the last revision it printed, so no
change still kept is missed or repeated. Each row starts with its revision
(REV): pass it to --resume-after to pick up where an earlier watch stopped.`,
		Example: `  setpointctl watch --cluster dev
  setpointctl watch --cluster dev --namespace shop --name web -o json
  setpointctl watch --resume-after 1234 --count 10`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&req.Cluster, "cluster", "", "only this cluster")
	fs.StringVar(&req.Namespace, "namespace", "", "only this namespace (with --cluster)")
	fs.StringVar(&req.Name, "name", "", "only this autoscaler (with --namespace)")
	fs.Uint64Var(&req.ResumeAfter, "resume-after", 0, "start after this revision (a REV printed before); 0: changes from now on")
	count := fs.Int("count", 0, "exit after this many changes; 0: follow until interrupted")
	out := outputFlag(cmd, "table", "json")
	cmd.RunE = serverRun(e, func(ctx context.Context, _ []string) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var rows *streamTable
		if *out == "table" {
			rows = newStreamTable(e.stdout, watchColumns)
		}
		status := &watchStatus{e: e}
		state := setpointclient.OnStreamState(status.report)
		n := 0
		for ch, err := range e.client.Changes(ctx, req, state) {
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return nil // interrupted
				}
				return err
			}
			if rows != nil {
				rows.row(changeRow(ch)...)
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
	})
	return cmd
}

// watchStatus tells on stderr that a watch lost the server and is
// reconnecting, once per outage and cause, and that it follows again.
type watchStatus struct {
	e *env
	// down is what was last said of the outage; "" while connected.
	down string
}

func (w *watchStatus) report(err error) {
	if err == nil {
		if w.down != "" {
			fmt.Fprintf(w.e.stderr, "watch: connected to %s again; following from where it stopped\n", w.e.cfg.Addr)
		}
		w.down = ""
		return
	}
	msg := w.e.explain(err).Error()
	switch {
	case errors.Is(err, io.EOF):
		msg = fmt.Sprintf("the server at %s ended the stream (shutting down?)", w.e.cfg.Addr)
	case status.Code(err) == codes.Unavailable && !errors.Is(err, setpointclient.ErrUnreachable):
		msg = fmt.Sprintf("the server at %s went away (%s)", w.e.cfg.Addr, status.Convert(err).Message())
	}
	if msg == w.down {
		return
	}
	w.down = msg
	fmt.Fprintf(w.e.stderr, "watch: %s\nwatch: retrying until the server answers (Ctrl-C to stop)…\n", msg)
}

// watchColumns are watch's columns with their widths: rows are written
// one at a time, so widths are fixed rather than measured.
var watchColumns = []column{{"REV", 8}, {"TIME", 20}, {"TARGET", 32}, {"CHANGE", 18}, {"DETAIL", 0}}

// column is a streamed table's column: a header and a minimum width.
type column struct {
	header string
	width  int
}

// streamTable writes rows as they come, aligned to fixed column widths
// (a longer cell pushes the rest of its own row only).
type streamTable struct {
	w    io.Writer
	cols []column
}

func newStreamTable(w io.Writer, cols []column) *streamTable {
	t := &streamTable{w: w, cols: cols}
	h := make([]string, len(cols))
	for i, c := range cols {
		h[i] = c.header
	}
	t.row(h...)
	return t
}

func (t *streamTable) row(cells ...string) {
	var b strings.Builder
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		if i == len(cells)-1 {
			b.WriteString(c)
			break
		}
		b.WriteString(c)
		for pad := t.cols[i].width - len([]rune(c)); pad > 0; pad-- {
			b.WriteByte(' ')
		}
		b.WriteString("   ")
	}
	b.WriteByte('\n')
	io.WriteString(t.w, b.String())
}

// changeRow is one change of Watch as a row of watchColumns.
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
