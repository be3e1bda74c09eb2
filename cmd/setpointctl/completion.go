package main

import (
	"context"
	"iter"
	"strings"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/spf13/cobra"
)

// completeTargets completes a CLUSTER/NAMESPACE/NAME argument with the
// targets the server keeps (nothing when it cannot be reached).
func (e *env) completeTargets(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return e.complete(cmd, args, toComplete, func(ctx context.Context, c *setpointclient.Client) iter.Seq2[string, error] {
		return func(yield func(string, error) bool) {
			for t, err := range c.Targets(ctx, &setpointv1.ListTargetsRequest{}) {
				if !yield(keyString(t.GetKey()), err) {
					return
				}
			}
		}
	})
}

// completeFleets completes a NAMESPACE/NAME argument with the fleets the
// server keeps that the caller may read (nothing when it cannot be
// reached).
func (e *env) completeFleets(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return e.complete(cmd, args, toComplete, func(ctx context.Context, c *setpointclient.Client) iter.Seq2[string, error] {
		return func(yield func(string, error) bool) {
			for f, err := range c.Fleets(ctx, &setpointv1.ListFleetsRequest{}) {
				if !yield(setpointclient.FleetKeyString(f.GetKey()), err) {
					return
				}
			}
		}
	})
}

// complete completes the one key argument (or a --seed-from flag) with
// the keys that start with toComplete, read within 2 s.
func (e *env) complete(cmd *cobra.Command, args []string, toComplete string, keys func(context.Context, *setpointclient.Client) iter.Seq2[string, error]) ([]cobra.Completion, cobra.ShellCompDirective) {
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
	for k, err := range keys(ctx, c) {
		if err != nil {
			break
		}
		if strings.HasPrefix(k, toComplete) {
			out = append(out, k)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
