package server_test

import (
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestListDecisions(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	ctx := t.Context()
	var want []int32
	var times []time.Time
	for range 5 {
		resp, err := c.Recommend(ctx, request("web", 4, ts.clock.Now()))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, resp.GetDecision().GetDesiredReplicas())
		times = append(times, ts.clock.Now())
		ts.clock.Step(15 * time.Second)
	}
	var got []int32
	req := &setpointv1.ListDecisionsRequest{Target: key("web"), PageSize: 2, StartTime: timestamppb.New(times[1])}
	for {
		resp, err := c.ListDecisions(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.GetDecisions() {
			got = append(got, d.GetDesiredReplicas())
			if d.GetExplanation().GetCurrentReplicas() != 4 || len(d.GetExplanation().GetMetrics()) != 1 {
				t.Errorf("logged explanation = %v, want 4 current replicas and one metric", d.GetExplanation())
			}
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	if len(got) != len(want)-1 || got[0] != want[1] {
		t.Errorf("desired replicas of the logged decisions = %v, want %v", got, want[1:])
	}

	bad := []*setpointv1.ListDecisionsRequest{
		{},
		{Target: key("web"), PageSize: -1},
		{Target: key("web"), StartTime: timestamppb.New(times[2]), EndTime: timestamppb.New(times[1])},
		{Target: key("web"), PageToken: "garbage"},
	}
	for _, r := range bad {
		if _, err := c.ListDecisions(ctx, r); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ListDecisions(%v) = %v, want InvalidArgument", r, err)
		}
	}
}
