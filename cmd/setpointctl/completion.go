package main

import (
	"context"
	"strings"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/spf13/cobra"
)

// completeTargets completes a CLUSTER/NAMESPACE/NAME argument with the
// targets the server keeps (nothing when it cannot be reached).
func (e *env) completeTargets(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 && cmd.Flags().Lookup("seed-from") == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := e.cfg.Dial()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out []cobra.Completion
	for t, err := range c.Targets(ctx, &setpointv1.ListTargetsRequest{}) {
		if err != nil {
			break
		}
		if k := keyString(t.GetKey()); strings.HasPrefix(k, toComplete) {
			out = append(out, k)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
