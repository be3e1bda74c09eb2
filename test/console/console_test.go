package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testpki"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The principals of the test and their tokens.
const (
	tokenAdmin     = "admin-token"
	tokenPlatformA = "platform-a-token"
	tokenAgentB    = "agent-b-token"
)

func principals() string {
	h := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	return fmt.Sprintf(`{"principals": [
  {"name": "ops", "role": "admin", "token_sha256": [%q]},
  {"name": "dashboard-a", "role": "platform", "clusters": ["a"], "token_sha256": [%q]},
  {"name": "agent-b", "role": "cluster:b", "token_sha256": [%q]}
]}`, h(tokenAdmin), h(tokenPlatformA), h(tokenAgentB))
}

// clock is the server's clock: the test moves it 15 s per sync.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// bearer is a per-call bearer token over plaintext (loopback only).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// env is a running server: its gRPC address, the console's base URL (the
// same console over TLS at tlsBase), and its clock.
type env struct {
	grpcAddr, base, tlsBase string
	clock                   *clock
}

func startServer(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	pf := filepath.Join(dir, "principals.json")
	if err := os.WriteFile(pf, []byte(principals()), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	auth, err := server.NewAuthenticator(pf, server.ReloadOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{now: time.Now().UTC().Add(-30 * time.Minute).Truncate(time.Second)}
	srv := servertest.Start(t, servertest.Config{Dir: dir, Options: server.Options{Auth: auth, Now: c.Now, Logger: log}})
	hlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", srv.Server.ConsoleHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(hlis) }()
	t.Cleanup(func() { _ = hs.Close() })
	// The same console over TLS (HTTP/2), with the server's reloading TLS
	// configuration, as setpoint-server -metrics-tls serves it.
	ca := testpki.TestCA(t, "console CA")
	files := testpki.Write(t, filepath.Join(dir, "tls"), ca, ca.Issue(t, testpki.Leaf{Server: true}))
	tlsCfg, err := server.NewTLSConfig(server.TLSFiles{Cert: files.Cert, Key: files.Key}, server.ReloadOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	tlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hts := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = hts.ServeTLS(tlis, "", "") }()
	t.Cleanup(func() { _ = hts.Close() })
	return &env{grpcAddr: srv.Addr, base: "http://" + hlis.Addr().String(), tlsBase: "https://" + tlis.Addr().String(), clock: c}
}

// conn is a connection to the server's gRPC address with token, closed
// when the test ends.
func (e *env) conn(t *testing.T, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (e *env) client(t *testing.T, token string) setpointv1.AutoscalerServiceClient {
	t.Helper()
	return setpointv1.NewAutoscalerServiceClient(e.conn(t, token))
}

func ptr[T any](v T) *T { return &v }

// webSpec is the spec of every test target: cpu at 50% of requests, 2 to
// 20 replicas, a one-minute scale-down window.
func webSpec(name string) *setpointv1.HorizontalPodAutoscalerSpec {
	return &setpointv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: name},
		MinReplicas:    ptr[int32](2),
		MaxReplicas:    20,
		Metrics: []*setpointv1.MetricSpec{{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{
			Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: ptr[int32](50)}}}},
		Behavior: &setpointv1.HorizontalPodAutoscalerBehavior{ScaleDown: &setpointv1.ScalingRules{StabilizationWindowSeconds: ptr[int32](60)}},
	}
}

// target is one simulated workload: its key and replica count.
type target struct {
	key      *setpointv1.TargetKey
	replicas int32
}

// sync decides for tg with a total cpu load of load millicores spread over
// its ready pods (1 cpu requested each), and applies a rescale.
func (e *env) sync(t *testing.T, c setpointv1.AutoscalerServiceClient, tg *target, load int64) *setpointv1.Decision {
	t.Helper()
	now, n := e.clock.Now(), tg.replicas
	req := &setpointv1.RecommendRequest{
		Target: tg.key, Spec: webSpec(tg.key.GetName()),
		Scale:           &setpointv1.Scale{Replicas: n, StatusReplicas: n, Selector: "app=" + tg.key.GetName()},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	for i := range n {
		pod := fmt.Sprintf("%s-%d", tg.key.GetName(), i)
		started := timestamppb.New(now.Add(-time.Hour))
		req.Pods = append(req.Pods, &setpointv1.Pod{
			Name: pod, Phase: "Running", StartTime: started,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: started},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "1"}}},
		})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{
			Pod: pod, Timestamp: timestamppb.New(now.Add(-10 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": fmt.Sprintf("%dm", load/int64(n))}}},
		})
	}
	resp, err := c.Recommend(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	d := resp.GetDecision()
	if d.GetRescale() {
		if _, err := c.Observe(t.Context(), &setpointv1.ObserveRequest{Target: tg.key, DecisionId: d.GetDecisionId(),
			Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: n, To: d.GetDesiredReplicas()}}}); err != nil {
			t.Fatal(err)
		}
		tg.replicas = d.GetDesiredReplicas()
	}
	return d
}

// browser starts one headless Chromium for the test and returns its
// context; a tab is chromedp.NewContext of it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed; CI installs it with `make chromium` (part of `make test`)")
		}
		t.Skip("skipping the console's browser test: Debian's chromium is not installed (make chromium installs it)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// The TLS tab's server certificate is the test's own.
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1100),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// tab opens a tab signed in with token at the console's path (after "#")
// under base.
func tab(t *testing.T, browserCtx context.Context, base, token, route string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	// The tab lives as long as the context of its first action: that one
	// has no timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	do(t, ctx, "sign in",
		chromedp.Navigate(base+"/console/#"+route),
		chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", token),
		chromedp.Click(`#login button[type=submit]`),
		chromedp.WaitNotPresent("#login"),
	)
	return ctx
}

// do runs actions in the tab ctx within 30 s; on failure it reports what
// the page shows and fails the test.
func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(actx, actions...); err != nil {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		text, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v\npage text:\n%s", what, err, text)
	}
}

// screenshot saves the tab's page as name.png in the test's artifact
// directory and in $SETPOINT_SCREENSHOTS when set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dirs := []string{t.ArtifactDir()}
	if d := os.Getenv("SETPOINT_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// evalStrings evaluates a JavaScript expression giving a list of strings.
func evalStrings(t *testing.T, ctx context.Context, expr string) []string {
	t.Helper()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return out
}

func TestConsole(t *testing.T) {
	e := startServer(t)
	admin := e.client(t, tokenAdmin)
	web := &target{key: &setpointv1.TargetKey{Cluster: "a", Namespace: "shop", Name: "web"}, replicas: 4}
	api := &target{key: &setpointv1.TargetKey{Cluster: "a", Namespace: "shop", Name: "api"}, replicas: 3}
	pay := &target{key: &setpointv1.TargetKey{Cluster: "b", Namespace: "pay", Name: "checkout"}, replicas: 2}
	// web: steady at 4, a burst that scales it to 12, then quiet again: the
	// one-minute scale-down window holds 12 for a minute, then it drops.
	loads := []int64{2000, 2000, 2000, 2000, 6000, 6000, 6000, 6000, 6000, 6000}
	for range 16 {
		loads = append(loads, 2000)
	}
	for _, load := range loads {
		e.sync(t, admin, web, load)
		e.sync(t, admin, api, 1500)
		e.sync(t, admin, pay, 900)
		e.clock.Step(15 * time.Second)
	}
	b := browser(t)

	t.Run("list shows what the principal may read", func(t *testing.T) {
		for _, tc := range []struct {
			name, token string
			want        []string
		}{
			{"platform-a", tokenPlatformA, []string{"a/shop/api", "a/shop/web"}},
			{"agent-b", tokenAgentB, []string{"b/pay/checkout"}},
			{"admin", tokenAdmin, []string{"a/shop/api", "a/shop/web", "b/pay/checkout"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := tab(t, b, e.base, tc.token, "/?sort=name")
				do(t, ctx, "list", chromedp.WaitVisible("#targets tr[data-key]"))
				got := evalStrings(t, ctx, `[...document.querySelectorAll('#targets tr[data-key]')].map(r => r.dataset.key)`)
				slices.Sort(got)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("targets listed (-want +got):\n%s", diff)
				}
				if tc.name == "admin" {
					screenshot(t, ctx, "console-targets")
				}
			})
		}
	})

	t.Run("target page", func(t *testing.T) {
		ctx := tab(t, b, e.base, tokenPlatformA, "/t/a/shop/web")
		do(t, ctx, "chart", chromedp.WaitVisible(".decision-point"))
		logged := listDecisions(t, admin, web.key)
		var wantMarkers []string
		for _, d := range logged {
			if d.GetRescale() {
				wantMarkers = append(wantMarkers, d.GetDecisionTime().AsTime().UTC().Format("2006-01-02T15:04:05Z"))
			}
		}
		points := evalStrings(t, ctx, `[...document.querySelectorAll('.replicas-chart .decision-point')].map(p => p.dataset.desired)`)
		var wantPoints []string
		for _, d := range logged {
			wantPoints = append(wantPoints, fmt.Sprint(d.GetDesiredReplicas()))
		}
		if diff := cmp.Diff(wantPoints, points); diff != "" {
			t.Errorf("chart points' desired replicas, one per logged decision (-want +got):\n%s", diff)
		}
		markers := evalStrings(t, ctx, `[...document.querySelectorAll('.replicas-chart .rescale-marker')].map(p => new Date(p.dataset.time).toISOString().replace('.000Z','Z'))`)
		if len(wantMarkers) == 0 {
			t.Fatal("the scenario made no rescale")
		}
		if diff := cmp.Diff(wantMarkers, markers); diff != "" {
			t.Errorf("rescale markers (-want +got):\n%s", diff)
		}

		// A decision made now shows up without a reload.
		do(t, ctx, "live updates", chromedp.WaitVisible("#live:not(.off)"))
		e.sync(t, admin, web, 9000)
		e.clock.Step(15 * time.Second)
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelectorAll('.replicas-chart .decision-point').length === %d`, len(logged)+1), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Fatalf("the new decision did not appear on the open page: %v", err)
		}
		logged = listDecisions(t, admin, web.key)

		// A longer scale-down window holds the replicas longer, as
		// Simulate says.
		do(t, ctx, "replay",
			chromedp.SetValue(`input[name=downWindow]`, "300"),
			chromedp.Click("#run-replay"),
			chromedp.WaitVisible("#replay-summary"),
		)
		drawn := evalStrings(t, ctx, `[...document.querySelectorAll('.replicas-chart .alt-point')].map(p => p.dataset.desired)`)
		want := simulateReplay(t, admin, web.key, logged, 300)
		if diff := cmp.Diff(want, drawn); diff != "" {
			t.Errorf("replay curve (-Simulate +drawn):\n%s", diff)
		}
		if countAbove(drawn, 4) <= countAbove(desiredOf(logged), 4) {
			t.Errorf("the replay with a 300 s window does not hold more replicas for longer: replay %v, logged %v", drawn, desiredOf(logged))
		}

		// A schedule window opening at the first logged decision's minute
		// with a floor of 20 (issue 32's try-before-enabling): the replay
		// draws what Simulate says of the spec with that window, and the
		// page says it reached the log's peak earlier.
		first := logged[0].GetDecisionTime().AsTime().UTC()
		cron := fmt.Sprintf("%d %d * * *", first.Minute(), first.Hour())
		do(t, ctx, "replay with a schedule window",
			chromedp.Click("#clear-replay"), // the last replay's answer goes
			chromedp.WaitNotPresent("#replay-summary"),
			chromedp.SetValue(`input[name=downWindow]`, "60"),
			chromedp.SetValue(`input[name=schedStart]`, cron),
			chromedp.SetValue(`input[name=schedMinutes]`, "2"),
			chromedp.SetValue(`input[name=schedMin]`, "20"),
			chromedp.Click("#run-replay"),
			chromedp.WaitVisible("#replay-changed"),
		)
		drawn = evalStrings(t, ctx, `[...document.querySelectorAll('.replicas-chart .alt-point')].map(p => p.dataset.desired)`)
		want = simulateReplayWith(t, admin, web.key, logged, func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			s.Schedules = []*setpointv1.ScheduleWindow{{Name: "what-if", TimeZone: "UTC", Start: cron, Duration: durationpb.New(2 * time.Minute), MinReplicas: 20}}
		})
		if diff := cmp.Diff(want, drawn); diff != "" {
			t.Errorf("replay curve with a schedule window (-Simulate +drawn):\n%s", diff)
		}
		if want[0] == desiredOf(logged)[0] {
			t.Errorf("the schedule window changed nothing at the first decision: replay %v, logged %v", want, desiredOf(logged))
		}
		changed := evalStrings(t, ctx, `[document.querySelector('#replay-changed').textContent]`)[0]
		if !strings.Contains(changed, "earlier") || !strings.Contains(changed, "replica-minutes") {
			t.Errorf("the page's summary %q does not say the replay reached the peak earlier and its replica-minutes", changed)
		}
		t.Logf("what-if with a schedule window: %s", changed)
		screenshot(t, ctx, "console-target")

		// A forecast with a 5-minute lead (the schedule window removed):
		// the replay keeps the metric's history from its first decision,
		// so over minutes of log the forecast stays silent, the curve is
		// Simulate's with spec.forecast, and the page says why it proposed
		// nothing (the steps' notes).
		do(t, ctx, "replay with a forecast",
			chromedp.Click("#clear-replay"),
			chromedp.WaitNotPresent("#replay-summary"),
			chromedp.SetValue(`input[name=schedStart]`, " "), // blank: no window (chromedp cannot set "", and Clear clears the attribute only)
			chromedp.SetValue(`input[name=fcLead]`, "300"),
			chromedp.SetValue(`input[name=fcMaxError]`, "20"),
			chromedp.Click("#run-replay"),
			chromedp.WaitVisible("#replay-forecast"),
		)
		drawn = evalStrings(t, ctx, `[...document.querySelectorAll('.replicas-chart .alt-point')].map(p => p.dataset.desired)`)
		want = simulateReplayWith(t, admin, web.key, logged, func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			s.Forecast = &setpointv1.Forecast{LeadTime: durationpb.New(5 * time.Minute), MaxError: 0.2}
		})
		if diff := cmp.Diff(want, drawn); diff != "" {
			t.Errorf("replay curve with a forecast (-Simulate +drawn):\n%s", diff)
		}
		said := evalStrings(t, ctx, `[document.querySelector('#replay-forecast').textContent]`)[0]
		for _, w := range []string{fmt.Sprintf("The forecast raised 0 of %d decisions", len(logged)), fmt.Sprintf("it proposed nothing at %d", len(logged)), "forecast cpu resource utilization", "48h0m0s needed"} {
			if !strings.Contains(said, w) {
				t.Errorf("the page's forecast summary %q does not say %q", said, w)
			}
		}
		t.Logf("what-if with a forecast: %s", said)
	})

	t.Run("over TLS and HTTP/2", func(t *testing.T) {
		ctx := tab(t, b, e.tlsBase, tokenPlatformA, "/t/a/shop/web")
		do(t, ctx, "chart", chromedp.WaitVisible(".decision-point"), chromedp.WaitVisible("#live:not(.off)"))
		protos := evalStrings(t, ctx, `[...new Set(performance.getEntriesByType('resource').filter(r => r.name.includes('/console/api/')).map(r => r.nextHopProtocol))]`)
		if diff := cmp.Diff([]string{"h2"}, protos); diff != "" {
			t.Errorf("protocols of the console's API calls (-want +got):\n%s", diff)
		}
		logged := len(listDecisions(t, admin, web.key))
		e.sync(t, admin, web, 3000)
		e.clock.Step(15 * time.Second)
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelectorAll('.replicas-chart .decision-point').length === %d`, logged+1), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Fatalf("the new decision did not appear on the page served over TLS: %v", err)
		}
	})
}

func desiredOf(ds []*setpointv1.LoggedDecision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprint(d.GetDesiredReplicas()))
	}
	return out
}

// countAbove counts the replica counts in vs above n.
func countAbove(vs []string, n int) int {
	c := 0
	for _, v := range vs {
		var x int
		fmt.Sscan(v, &x)
		if x > n {
			c++
		}
	}
	return c
}

func listDecisions(t *testing.T, c setpointv1.AutoscalerServiceClient, k *setpointv1.TargetKey) []*setpointv1.LoggedDecision {
	t.Helper()
	resp, err := c.ListDecisions(t.Context(), &setpointv1.ListDecisionsRequest{Target: k})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetDecisions()
}

// simulateReplay asks Simulate what the target would have decided with a
// scale-down window of window seconds (simulateReplayWith).
func simulateReplay(t *testing.T, c setpointv1.AutoscalerServiceClient, k *setpointv1.TargetKey, logged []*setpointv1.LoggedDecision, window int32) []string {
	t.Helper()
	return simulateReplayWith(t, c, k, logged, func(s *setpointv1.HorizontalPodAutoscalerSpec) {
		s.Behavior.ScaleDown.StabilizationWindowSeconds = ptr(window)
	})
}

// simulateReplayWith asks Simulate what the target would have decided with
// its spec changed by edit, from the logged utilizations: pods requesting
// 100 units of cpu each use the logged percent.
func simulateReplayWith(t *testing.T, c setpointv1.AutoscalerServiceClient, k *setpointv1.TargetKey, logged []*setpointv1.LoggedDecision, edit func(*setpointv1.HorizontalPodAutoscalerSpec)) []string {
	t.Helper()
	spec := webSpec(k.GetName())
	edit(spec)
	req := &setpointv1.SimulateRequest{Spec: spec, PodModel: &setpointv1.PodModel{
		InitialReplicas: logged[0].GetExplanation().GetCurrentReplicas(), Requests: map[string]string{"cpu": "100"}}}
	for _, d := range logged {
		req.Steps = append(req.Steps, &setpointv1.SimulateStep{Time: d.GetDecisionTime(),
			MetricValues: []string{fmt.Sprint(d.GetExplanation().GetMetrics()[0].GetCurrent())}})
	}
	resp, err := c.Simulate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range resp.GetSteps() {
		out = append(out, fmt.Sprint(s.GetDecision().GetDesiredReplicas()))
	}
	return out
}
