package setpointclient_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// readRequest reads the README's example RecommendRequest.
func readRequest() *setpointv1.RecommendRequest {
	b, err := os.ReadFile("../../testdata/examples/recommend.json")
	if err != nil {
		log.Fatal(err)
	}
	req := &setpointv1.RecommendRequest{}
	if err := protojson.Unmarshal(b, req); err != nil {
		log.Fatal(err)
	}
	return req
}

// An agent's loop: ask for a decision, apply it, report what was done.
func ExampleClient_Decide() {
	ctx := context.Background()
	c, err := setpointclient.Dial(addr, setpointclient.Options{}) // plaintext: a loopback development server
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	req := readRequest() // dev/shop/web: 2 pods at 87% cpu against 60%
	d, err := c.Decide(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("desired replicas:", d.GetDesiredReplicas(), "rescale:", d.GetRescale())
	m := d.GetExplanation().GetMetrics()[0]
	fmt.Printf("%s: ratio %.2f → %d\n", m.GetName(), m.GetRatio(), m.GetProposal())

	// ... write the Scale subresource, then:
	st, err := c.Applied(ctx, req.GetTarget(), d.GetDecisionId(), 2, d.GetDesiredReplicas())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("last scaled:", st.GetLastScaleTime().AsTime().Format(time.RFC3339))
	// Output:
	// desired replicas: 3 rescale: true
	// cpu resource utilization (percentage of request): ratio 1.45 → 3
	// last scaled: 2026-03-01T12:00:00Z
}

// A dashboard lists every target of a cluster, whatever the page size.
func ExampleClient_Targets() {
	ctx := context.Background()
	c, err := setpointclient.Dial(addr, setpointclient.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, name := range []string{"web", "api", "worker"} {
		req := readRequest()
		req.Target = setpointclient.Key("staging", "shop", name)
		if _, err := c.Decide(ctx, req); err != nil {
			log.Fatal(err)
		}
	}

	for t, err := range c.Targets(ctx, &setpointv1.ListTargetsRequest{Cluster: "staging", PageSize: 2}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(setpointclient.KeyString(t.GetKey()), t.GetStatus().GetDesiredReplicas())
	}
	// Output:
	// staging/shop/api 3
	// staging/shop/web 3
	// staging/shop/worker 3
}

// A capacity planner asks what the autoscaler would do if load doubled,
// without touching any stored target.
func ExampleClient_simulate() {
	ctx := context.Background()
	c, err := setpointclient.Dial(addr, setpointclient.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	req := &setpointv1.SimulateRequest{
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    20,
			Metrics: []*setpointv1.MetricSpec{{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{
				Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: proto.Int32(50)},
			}}},
		},
		PodModel: &setpointv1.PodModel{InitialReplicas: 4, Requests: map[string]string{"cpu": "1"}},
	}
	for i, usage := range []string{"500m", "1", "1", "750m"} { // per pod, of 1 cpu requested
		req.Steps = append(req.Steps, &setpointv1.SimulateStep{
			Time:         timestamppb.New(t0.Add(time.Duration(i) * time.Minute)),
			MetricValues: []string{usage},
		})
	}
	resp, err := c.Simulate(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	for i, s := range resp.GetSteps() {
		d := s.GetDecision()
		fmt.Printf("step %d: %d → %d\n", i, d.GetExplanation().GetCurrentReplicas(), d.GetDesiredReplicas())
	}
	// Output:
	// step 0: 4 → 4
	// step 1: 4 → 8
	// step 2: 8 → 16
	// step 3: 16 → 20
}

// A dashboard follows every rescale of a cluster as it is decided, over
// mutual TLS. The README shows this example.
func ExampleClient_Changes() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go decideEvery(ctx, "prod", 20*time.Millisecond) // an agent in cluster prod

	tc, err := setpointclient.TLSFiles{CA: caFile, Cert: certFile, Key: keyFile}.Config()
	if err != nil {
		log.Fatal(err)
	}
	c, err := setpointclient.Dial(serverAddr, setpointclient.Options{TLS: tc}) // Token: for a bearer token
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for ch, err := range c.Changes(ctx, &setpointv1.WatchRequest{Cluster: "prod"}) { // resumes by itself
		if err != nil {
			log.Fatal(err) // the server refused the watch, or ctx ended
		}
		if d := ch.GetDecision(); d.GetRescale() {
			fmt.Printf("%s: %d → %d replicas\n", setpointclient.KeyString(ch.GetTarget()), d.GetStatus().GetCurrentReplicas(), d.GetDesiredReplicas())
			break // an example stops after one
		}
	}
	// Output:
	// prod/shop/web: 2 → 3 replicas
}

// decideEvery asks the TLS server for the README example's decision in
// cluster every interval until ctx ends.
func decideEvery(ctx context.Context, cluster string, interval time.Duration) {
	tc, err := setpointclient.TLSFiles{CA: caFile, Cert: certFile, Key: keyFile}.Config()
	if err != nil {
		log.Fatal(err)
	}
	c, err := setpointclient.Dial(serverAddr, setpointclient.Options{TLS: tc})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	req := readRequest()
	req.Target.Cluster = cluster
	for {
		c.Decide(ctx, req)
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// A deploy pipeline checks an autoscaler spec before shipping it: the
// service names each invalid field.
func ExampleFieldViolations() {
	c, err := setpointclient.Dial(addr, setpointclient.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	req := readRequest()
	req.Spec.MaxReplicas = 0
	_, err = c.Decide(context.Background(), req)
	for field, why := range setpointclient.FieldViolations(err) {
		fmt.Printf("%s: %s\n", field, why)
	}
	// Output:
	// spec.max_replicas: must be >= 1, got 0
}
