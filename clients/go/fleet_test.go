package setpointclient_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestParseFleetKey(t *testing.T) {
	k, err := setpointclient.ParseFleetKey("shop/web")
	if err != nil || setpointclient.FleetKeyString(k) != "shop/web" {
		t.Errorf("ParseFleetKey(shop/web) = %v, %v", k, err)
	}
	for _, s := range []string{"", "web", "shop/", "/web", "dev/shop/web"} {
		if _, err := setpointclient.ParseFleetKey(s); !errors.Is(err, setpointclient.ErrBadKey) {
			t.Errorf("ParseFleetKey(%q) = %v, want ErrBadKey", s, err)
		}
	}
}

// exampleFleet is a fleet of web in namespace ns over clusters eu and us,
// weighted 2:1: cpu at 60% of requests, 2 to 12 replicas in total.
func exampleFleet(ns string) *setpointv1.PutFleetRequest {
	return &setpointv1.PutFleetRequest{
		Fleet: setpointclient.FleetKey(ns, "web"),
		Spec: &setpointv1.FleetSpec{
			Autoscaler: &setpointv1.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MinReplicas:    new(int32(2)),
				MaxReplicas:    12,
				Metrics: []*setpointv1.MetricSpec{{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{
					Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: new(int32(60))}}}},
			},
			Members: []*setpointv1.FleetMember{{Cluster: "eu", Weight: 2}, {Cluster: "us", Weight: 1}},
		},
	}
}

// report is member's report at exampleNow: n pods requesting 500m cpu,
// each using use millicores.
func report(member string, n int, use int) *setpointv1.FleetReport {
	r := &setpointv1.FleetReport{Member: member, Scale: &setpointv1.Scale{Replicas: int32(n), StatusReplicas: int32(n), Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{}, Observations: []*setpointv1.MetricObservation{{}}}
	started := timestamppb.New(exampleNow.Add(-time.Hour))
	for i := range n {
		pod := fmt.Sprintf("web-%d", i)
		r.Pods = append(r.Pods, &setpointv1.Pod{Name: pod, Phase: "Running", StartTime: started,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: started},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m"}}}})
		r.ResourceMetrics.Items = append(r.ResourceMetrics.Items, &setpointv1.PodMetrics{Pod: pod,
			Timestamp: timestamppb.New(exampleNow.Add(-15 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": fmt.Sprintf("%dm", use)}}}})
	}
	return r
}

// A platform puts a fleet, its members' agents report, and the fleet's
// split says what each member runs and why.
func ExampleClient_Fleet() {
	ctx := context.Background()
	c, err := setpointclient.Dial(addr, setpointclient.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	put := exampleFleet("example")
	if _, err := c.PutFleet(ctx, put); err != nil {
		log.Fatal(err)
	}
	// eu's agent reports 2 pods at 90% of their cpu: the fleet's first
	// decision, over eu alone (us has not reported yet), is 3 replicas.
	resp, err := c.Report(ctx, &setpointv1.ReportRequest{Fleet: put.GetFleet(), Report: report("eu", 2, 450)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("eu's share:", resp.GetShare().GetReplicas(), "of", resp.GetTotal())

	f, err := c.Fleet(ctx, put.GetFleet())
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range f.GetSplit().GetShares() {
		fmt.Printf("%s: %d (%s) %s\n", s.GetMember(), s.GetReplicas(), s.GetReason(), s.GetMessage())
	}
	// Output:
	// eu's share: 3 of 3
	// eu: 3 (Weighted) weight 2 of 2: quota 3×2/2 = 3
	// us: 0 (Excluded) left out (NoReport): no share; its replicas moved to the pooled members
}

// TestFleets: Fleets iterates over every page of ListFleets, Share picks a
// member's share, and a fleet that is not kept is ErrFleetNotFound.
func TestFleets(t *testing.T) {
	ctx := t.Context()
	c, err := setpointclient.Dial(addr, setpointclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, ns := range []string{"pages-a", "pages-b", "pages-c"} {
		if _, err := c.PutFleet(ctx, exampleFleet(ns)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for f, err := range c.Fleets(ctx, &setpointv1.ListFleetsRequest{PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		if k := setpointclient.FleetKeyString(f.GetKey()); len(k) > 6 && k[:6] == "pages-" {
			got = append(got, k)
		}
	}
	if fmt.Sprint(got) != "[pages-a/web pages-b/web pages-c/web]" {
		t.Errorf("Fleets = %v, want the three fleets, each once", got)
	}

	resp, err := c.Report(ctx, &setpointv1.ReportRequest{Fleet: setpointclient.FleetKey("pages-a", "web"), Report: report("us", 3, 300)})
	if err != nil {
		t.Fatal(err)
	}
	if sh := setpointclient.Share(resp.GetSplit(), "us"); sh == nil || sh.GetReplicas() != resp.GetShare().GetReplicas() {
		t.Errorf("Share(split, us) = %v, want the response's share %v", sh, resp.GetShare())
	}
	if sh := setpointclient.Share(resp.GetSplit(), "ap"); sh != nil {
		t.Errorf("Share(split, ap) = %v, want nil", sh)
	}

	_, err = c.Fleet(ctx, setpointclient.FleetKey("pages-a", "nope"))
	if !errors.Is(err, setpointclient.ErrFleetNotFound) || err.Error() != "fleet pages-a/nope not found: the service keeps no such fleet (it was never put, or was deleted)" {
		t.Errorf("Fleet(pages-a/nope) = %v, want ErrFleetNotFound in the caller's terms", err)
	}
	if _, err := c.DeleteFleet(ctx, &setpointv1.DeleteFleetRequest{Fleet: setpointclient.FleetKey("pages-b", "web")}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Fleet(ctx, setpointclient.FleetKey("pages-b", "web"))
	if !errors.Is(err, setpointclient.ErrFleetNotFound) {
		t.Errorf("Fleet of a deleted fleet = %v, want ErrFleetNotFound", err)
	}
}
