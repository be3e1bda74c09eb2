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
