package setpointclient

import (
	"context"
	"fmt"
	"iter"
	"strings"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Key returns the key of the autoscaler name in namespace of cluster.
func Key(cluster, namespace, name string) *setpointv1.TargetKey {
	return &setpointv1.TargetKey{Cluster: cluster, Namespace: namespace, Name: name}
}

// ParseKey parses "CLUSTER/NAMESPACE/NAME", the form KeyString prints; an
// error for any other form matches ErrBadKey and shows the expected one.
func ParseKey(s string) (*setpointv1.TargetKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil, &callError{fmt.Sprintf("%q is not a target: a target is CLUSTER/NAMESPACE/NAME, e.g. dev/shop/web (the cluster name its agent was given, then the Autoscaler's namespace and name)", s), nil, ErrBadKey}
	}
	return Key(parts[0], parts[1], parts[2]), nil
}

// KeyString formats k as "CLUSTER/NAMESPACE/NAME".
func KeyString(k *setpointv1.TargetKey) string {
	return k.GetCluster() + "/" + k.GetNamespace() + "/" + k.GetName()
}

// Decide calls Recommend and returns its decision.
func (c *Client) Decide(ctx context.Context, req *setpointv1.RecommendRequest) (*setpointv1.Decision, error) {
	resp, err := c.Recommend(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.GetDecision(), nil
}

// Applied reports that decision's rescale of target was written, from →
// to replicas; it becomes a scale event the scaling policies count.
func (c *Client) Applied(ctx context.Context, target *setpointv1.TargetKey, decision string, from, to int32) (*setpointv1.HorizontalPodAutoscalerStatus, error) {
	return c.observe(ctx, &setpointv1.ObserveRequest{Target: target, DecisionId: decision,
		Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: from, To: to}}})
}

// Failed reports that writing decision's count to target failed with
// message; the status then carries FailedUpdateScale.
func (c *Client) Failed(ctx context.Context, target *setpointv1.TargetKey, decision string, to int32, message string) (*setpointv1.HorizontalPodAutoscalerStatus, error) {
	return c.observe(ctx, &setpointv1.ObserveRequest{Target: target, DecisionId: decision,
		Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: to, Message: message}}})
}

// ExternalChange reports that someone other than the autoscaler changed
// target's replica count from → to.
func (c *Client) ExternalChange(ctx context.Context, target *setpointv1.TargetKey, from, to int32) (*setpointv1.HorizontalPodAutoscalerStatus, error) {
	return c.observe(ctx, &setpointv1.ObserveRequest{Target: target,
		Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: from, To: to}}})
}

func (c *Client) observe(ctx context.Context, req *setpointv1.ObserveRequest) (*setpointv1.HorizontalPodAutoscalerStatus, error) {
	resp, err := c.Observe(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.GetStatus(), nil
}

// Target returns what the service keeps for one autoscaler.
func (c *Client) Target(ctx context.Context, key *setpointv1.TargetKey) (*setpointv1.Target, error) {
	resp, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key})
	if err != nil {
		return nil, err
	}
	return resp.GetTarget(), nil
}

// Targets iterates over every target req selects, calling ListTargets page
// after page (req.PageSize per page, req.PageToken to start from; req is
// not modified). An error ends the iteration after being yielded once.
//
//	for t, err := range c.Targets(ctx, &setpointv1.ListTargetsRequest{Cluster: "prod"}) {
//		if err != nil { return err }
//		...
//	}
func (c *Client) Targets(ctx context.Context, req *setpointv1.ListTargetsRequest) iter.Seq2[*setpointv1.Target, error] {
	return func(yield func(*setpointv1.Target, error) bool) {
		page := &setpointv1.ListTargetsRequest{Cluster: req.GetCluster(), Namespace: req.GetNamespace(), PageSize: req.GetPageSize(), PageToken: req.GetPageToken()}
		for {
			resp, err := c.ListTargets(ctx, page)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, t := range resp.GetTargets() {
				if !yield(t, nil) {
					return
				}
			}
			if resp.GetNextPageToken() == "" {
				return
			}
			page.PageToken = resp.GetNextPageToken()
		}
	}
}

// FieldViolations returns what an INVALID_ARGUMENT error says of each
// invalid field of the request (field path, e.g.
// "spec.metrics[0].resource.target.average_utilization" → description),
// read from its google.rpc.BadRequest detail; nil for any other error.
func FieldViolations(err error) map[string]string {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return nil
	}
	var out map[string]string
	for _, d := range st.Details() {
		br, ok := d.(*errdetails.BadRequest)
		if !ok {
			continue
		}
		for _, v := range br.GetFieldViolations() {
			if out == nil {
				out = map[string]string{}
			}
			out[v.GetField()] = v.GetDescription()
		}
	}
	return out
}
