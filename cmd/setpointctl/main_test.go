package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// example is the README's example request.
const example = "../../testdata/examples/recommend.json"

// startServer runs a real server over a real store until the test ends; its
// clock is the example's instant.
func startServer(t *testing.T) string {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "setpoint.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	srv := server.New(st, server.Options{Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		st.Close()
	})
	return lis.Addr().String()
}

// TestExampleRequest sends the documented example through the CLI to a real
// server, so the docs cannot drift from the API.
func TestExampleRequest(t *testing.T) {
	if _, err := ReadRequest(example); err != nil {
		t.Fatalf("example does not parse: %v", err)
	}
	addr := startServer(t)
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-addr", addr, "recommend", "-f", example}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	resp := &setpointv1.RecommendResponse{}
	if err := protojson.Unmarshal(out.Bytes(), resp); err != nil {
		t.Fatalf("output is not a RecommendResponse: %v\n%s", err, out.String())
	}
	// 870m of 1000m requested is 87% against 60%: ceil(2 × 1.45) = 3.
	if d := resp.GetDecision(); d.GetDesiredReplicas() != 3 || !d.GetRescale() {
		t.Errorf("decision = %v, want a rescale to 3", d)
	}
}

func TestCommands(t *testing.T) {
	addr := startServer(t)
	ctl := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), append([]string{"-addr", addr}, args...), &out, io.Discard)
		return out.String(), err
	}
	if _, err := ctl("recommend", "-f", example); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		want    string
		wantErr bool
	}{
		{[]string{"get", "dev/shop/web"}, `"scaleTargetRef"`, false},
		{[]string{"list", "-cluster", "dev"}, `"web"`, false},
		{[]string{"get", "dev/web"}, "", true},
		{[]string{"frobnicate"}, "", true},
		{[]string{"delete", "dev/shop/web"}, "{}", false},
		{[]string{"get", "dev/shop/web"}, "", true},
	}
	for _, tt := range tests {
		out, err := ctl(tt.args...)
		if (err != nil) != tt.wantErr || !strings.Contains(out, tt.want) {
			t.Errorf("setpointctl %v = %q, %v; want %q, error %v", tt.args, out, err, tt.want, tt.wantErr)
		}
	}
}
