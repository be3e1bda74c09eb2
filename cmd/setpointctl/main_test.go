package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/servertest"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// example is the README's example request.
const example = "../../testdata/examples/recommend.json"

// exampleNow is the instant of the example request.
var exampleNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// startServer runs a real server over a real store until the test ends; its
// clock is the example's instant.
func startServer(t *testing.T) string {
	t.Helper()
	return startServerOpts(t, server.Options{Now: func() time.Time { return exampleNow }})
}

func startServerOpts(t *testing.T, o server.Options) string {
	t.Helper()
	return servertest.Start(t, servertest.Config{Options: o}).Addr
}

// ctl runs setpointctl against addr and returns what it printed.
func ctl(ctx context.Context, addr string, args ...string) (string, error) {
	return ctlAt(ctx, addr, exampleNow.Add(90*time.Second), args...)
}

// ctlAt is ctl with setpointctl's clock at now.
func ctlAt(ctx context.Context, addr string, now time.Time, args ...string) (string, error) {
	var out bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	err := c.run(ctx, append([]string{"-addr", addr}, args...))
	return out.String(), err
}

// TestExampleRequest sends the documented example through the CLI to a real
// server, so the docs cannot drift from the API.
func TestExampleRequest(t *testing.T) {
	addr := startServer(t)
	out, err := ctl(t.Context(), addr, "recommend", "-f", example)
	if err != nil {
		t.Fatal(err)
	}
	resp := &setpointv1.RecommendResponse{}
	if err := protojson.Unmarshal([]byte(out), resp); err != nil {
		t.Fatalf("output is not a RecommendResponse: %v\n%s", err, out)
	}
	// 870m of 1000m requested is 87% against 60%: ceil(2 × 1.45) = 3.
	if d := resp.GetDecision(); d.GetDesiredReplicas() != 3 || !d.GetRescale() {
		t.Errorf("decision = %v, want a rescale to 3", d)
	}
}

func TestCommands(t *testing.T) {
	addr := startServer(t)
	if _, err := ctl(t.Context(), addr, "recommend", "-f", example); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		want    []string
		wantErr bool
	}{
		{[]string{"list"}, []string{
			"TARGET         REFERENCE        TARGETS   MINPODS   MAXPODS   REPLICAS   DESIRED   LAST SEEN",
			"dev/shop/web   Deployment/web   87%/60%   2         10        2          3         90s",
		}, false},
		{[]string{"list", "--cluster", "dev", "-o", "wide"}, []string{"LAST DECISION", "2 → 3: cpu resource utilization (percentage of request) proposed 3 (ratio 1.45)"}, false},
		{[]string{"list", "--cluster", "prod"}, []string{"TARGET"}, false},
		{[]string{"get", "dev/shop/web", "-o", "json"}, []string{`"scaleTargetRef"`, `"desiredReplicas": 3`}, false},
		{[]string{"get", "-o", "yaml", "dev/shop/web"}, []string{"scaleTargetRef:", "desiredReplicas: 3"}, false},
		{[]string{"get", "dev/shop/web"}, []string{"dev/shop/web   Deployment/web   87%/60%"}, false},
		{[]string{"explain", "dev/shop/web"}, []string{
			"dev/shop/web scales Deployment/web between 2 and 10 replicas.",
			"At 2026-03-01T12:00:00Z it decided to scale from 2 to 3 replicas.",
			"cpu resource utilization (percentage of request): usage ratio 1.45 (current 87% over target 60%), so it proposed 3 (2 ready pods). This is the largest proposal: it was used.",
			"Nothing held the proposal back: the decision is 3.",
			"ScalingActive=True (ValidMetricFound)",
		}, false},
		{[]string{"history", "dev/shop/web"}, []string{"2026-03-01T12:00:00.000Z   recommendation   3"}, false},
		{[]string{"history", "--decisions", "dev/shop/web"}, []string{"2026-03-01T12:00:00.000Z   2 → 3      3          87/60 → 3"}, false},
		{[]string{"history", "--decisions", "-o", "json", "dev/shop/web"}, []string{`"desiredReplicas": 3`}, false},
		{[]string{"get", "dev/web"}, nil, true},
		{[]string{"get", "dev/shop/web", "-o", "xml"}, nil, true},
		{[]string{"get"}, nil, true},
		{[]string{"frobnicate"}, nil, true},
		{[]string{"delete", "dev/shop/web"}, []string{"target dev/shop/web deleted"}, false},
		{[]string{"get", "dev/shop/web"}, nil, true},
	}
	for _, tt := range tests {
		out, err := ctl(t.Context(), addr, tt.args...)
		if (err != nil) != tt.wantErr {
			t.Errorf("setpointctl %v: error %v, want error %v", tt.args, err, tt.wantErr)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("setpointctl %v printed\n%s\nwant it to contain %q", tt.args, out, w)
			}
		}
	}
}

// TestListFormats: the JSON and YAML of list parse back into the targets,
// across pages.
func TestListFormats(t *testing.T) {
	addr := startServer(t)
	for _, name := range []string{"a", "b", "c"} {
		req := readExample(t)
		req.Target.Name = name
		b, _ := protojson.Marshal(req)
		c := &cli{stdin: bytes.NewReader(b), stdout: io.Discard, stderr: io.Discard, now: time.Now}
		if err := c.run(t.Context(), []string{"-addr", addr, "recommend", "-f", "-"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, format := range []string{"json", "yaml"} {
		out, err := ctl(t.Context(), addr, "list", "-o", format)
		if err != nil {
			t.Fatal(err)
		}
		b := []byte(out)
		if format == "yaml" {
			if b, err = yaml.YAMLToJSON(b); err != nil {
				t.Fatal(err)
			}
		}
		var resp setpointv1.ListTargetsResponse
		if err := protojson.Unmarshal(b, &resp); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out)
		}
		var names []string
		for _, tg := range resp.GetTargets() {
			names = append(names, tg.GetKey().GetName())
		}
		if strings.Join(names, ",") != "a,b,c" {
			t.Errorf("-o %s: targets %v, want a,b,c", format, names)
		}
	}
}

func readExample(t testing.TB) *setpointv1.RecommendRequest {
	t.Helper()
	req := &setpointv1.RecommendRequest{}
	if err := readMessage(nil, example, req); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestPrintViolations(t *testing.T) {
	addr := startServer(t)
	req := readExample(t)
	req.Spec.MaxReplicas = 0
	req.Spec.Metrics[0].Resource.Target.AverageUtilization = new(int32(-5))
	b, _ := protojson.Marshal(req)
	c := &cli{stdin: bytes.NewReader(b), stdout: io.Discard, stderr: io.Discard, now: time.Now}
	err := c.run(t.Context(), []string{"-addr", addr, "recommend", "-f", "-"})
	var out bytes.Buffer
	printViolations(&out, err)
	want := "  spec.max_replicas: must be >= 1, got 0\n  spec.metrics[0].resource.target.average_utilization:"
	if !strings.HasPrefix(out.String(), want) {
		t.Errorf("printed\n%s\nwant it to start with\n%s", out.String(), want)
	}
}
