package admission

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/auth"
	"google.golang.org/grpc/metadata"
)

// BenchmarkGuard is what the chain adds to an authenticated call:
// authentication by bearer token, the rate limit and authorization.
func BenchmarkGuard(b *testing.B) {
	path := filepath.Join(b.TempDir(), "principals.yaml")
	if err := os.WriteFile(path, []byte("principals:\n- name: a\n  role: cluster:eu1\n  token_sha256: [\"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"]\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	authn, err := auth.NewAuthenticator(path, auth.ReloadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	g := &guard{auth: authn, rates: newRateLimiter(1e12, 1<<30, time.Now), audit: auditor{}}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer test"))
	req := &setpointv1.RecommendRequest{Target: &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: "web"}}
	b.ReportAllocs()
	for b.Loop() {
		actx, err := g.authenticate(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.rates.check(actx); err != nil {
			b.Fatal(err)
		}
		if err := g.authorize(actx, setpointv1.AutoscalerService_Recommend_FullMethodName, req); err != nil {
			b.Fatal(err)
		}
	}
}
