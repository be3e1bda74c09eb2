package server_test

// The web console's findings (issue 28), each kept as a test: the console
// reaches the service only through the gRPC server's admission.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/internal/testpki"
	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// consoleEnv is a server with authentication (pkiFixture's principals) and
// its console on a plaintext HTTP listener.
type consoleEnv struct {
	ts  *testServer
	f   *pkiFixture
	url string
	// agentA writes cluster a over gRPC (its certificate).
	agentA setpointv1.AutoscalerServiceClient
}

// startConsole starts a server with o (TLS and authentication added) and
// its console.
func startConsole(t testing.TB, o server.Options) *consoleEnv {
	t.Helper()
	f := newPKI(t)
	base := f.options(t, slog.New(slog.NewTextHandler(io.Discard, nil)))
	o.TLS, o.Auth = base.TLS, base.Auth
	if o.Logger == nil {
		o.Logger = base.Logger
	}
	ts := start(t, setup{opts: o})
	hs := httptest.NewServer(ts.srv.ConsoleHandler())
	t.Cleanup(hs.Close)
	cert := f.clientCA.Issue(t, testpki.Leaf{URI: "spiffe://setpoint.test/cluster/a"})
	return &consoleEnv{ts: ts, f: f, url: hs.URL, agentA: f.client(t, ts.addr, creds{cert: &cert.Cert})}
}

// consoleDo makes a console request with a bearer token ("" for none) and
// edit applied, and returns the status and body.
func consoleDo(t *testing.T, method, url, token string, body []byte, edit func(*http.Request)) (int, []byte) {
	t.Helper()
	return consoleWithin(t, 0, method, url, token, body, edit)
}

// consoleWithin is consoleDo whose answer is read for at most d (0: to its
// end): an event stream's does not end.
func consoleWithin(t *testing.T, d time.Duration, method, url, token string, body []byte, edit func(*http.Request)) (int, []byte) {
	t.Helper()
	ctx := t.Context()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// logDecisions makes n decisions for a/shop/name, one a second of the test
// clock.
func (e *consoleEnv) logDecisions(t testing.TB, name string, n int) {
	t.Helper()
	for i := range n {
		req := request(name, 3, e.ts.clock.Now())
		req.Target.Cluster = "a"
		if _, err := e.agentA.Recommend(t.Context(), req); err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
		e.ts.clock.Step(time.Second)
	}
}

// replayOf is a replay request body for a/shop/name with the spec of
// request(name), changed by edit.
func replayOf(t testing.TB, name string, edit func(*setpointv1.HorizontalPodAutoscalerSpec)) []byte {
	t.Helper()
	spec := request(name, 3, t0).GetSpec()
	if edit != nil {
		edit(spec)
	}
	s, err := protojson.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Appendf(nil, `{"target": {"cluster": "a", "namespace": "shop", "name": %q}, "spec": %s}`, name, s)
}

// TestConsoleTargetPageMemory (finding 1): 80 concurrent views of the
// page of a target with 3,000 logged decisions, by the one principal that
// may read it, as the page makes them (the target, then one page of its
// log). The log comes in pages of at most 500 and each view is a call
// through the admission (the principal's call bound refuses the excess),
// so the heap grows by tens of MiB; the whole log in every answer took
// hundreds.
func TestConsoleTargetPageMemory(t *testing.T) {
	const (
		views     = 80
		decisions = 3000
		bound     = 96 << 20
	)
	e := startConsole(t, server.Options{})
	e.logDecisions(t, "web", decisions)
	page := e.url + "/console/api/target?cluster=a&namespace=shop&name=web"
	log := e.url + "/console/api/decisions?cluster=a&namespace=shop&name=web&page_size=500"

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	var served, refused, most atomic.Int64
	for range views {
		wg.Go(func() {
			for _, u := range []string{page, log} {
				code, body := consoleDo(t, http.MethodGet, u, "platform-token", nil, nil)
				switch code {
				case http.StatusOK:
					served.Add(1)
					var got struct {
						Log struct{ Decisions []json.RawMessage } `json:"log"`
					}
					_ = json.Unmarshal(body, &got)
					for n := int64(len(got.Log.Decisions)); n > most.Load(); {
						most.Store(n)
					}
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					t.Errorf("GET %s: %d %.200s", u, code, body)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	grown := int64(peak.Load()) - int64(before.HeapInuse)
	t.Logf("%d concurrent page views of a target with %d decisions: %d answers served, %d refused (429); the largest log answer %d decisions; heap in use %d MiB before, peak %d MiB (+%d MiB)",
		views, decisions, served.Load(), refused.Load(), most.Load(), before.HeapInuse>>20, peak.Load()>>20, grown>>20)
	if most.Load() > 500 {
		t.Errorf("a console answer carried %d decisions, want pages of at most 500", most.Load())
	}
	if grown > bound {
		t.Errorf("the heap grew by %d MiB under %d page views, over %d MiB", grown>>20, views, bound>>20)
	}
}

// floodRound is what one round of a replay flood measured.
type floodRound struct {
	// quiet and flooded are agent-b's latencies without and with the flood.
	quiet, flooded latencies
	// outcomes are the flood's answers by HTTP status; toldWhen counts
	// its 429s that carried a Retry-After.
	outcomes map[int]int
	toldWhen int
	// quietCPU and floodCPU are the process's CPU use (the server and
	// both clients) in each, in cores.
	quietCPU, floodCPU float64
}

// replayFlood is one round of a what-if replay flood: agent-b's normal
// gRPC load (quietLoad) for 2d without the flood and 2d with it, in four
// alternating windows (so that the machine's other load weighs on both
// alike), while a read-only principal's 16 goroutines send what-if
// replays of a 1,000-decision log during the flood's windows, retrying at
// once, refused or not.
func replayFlood(t testing.TB, d time.Duration) *floodRound {
	e := startConsole(t, server.Options{RateLimit: 1000, RateBurst: 2000})
	e.logDecisions(t, "web", 1000)
	b := e.f.client(t, e.ts.addr, creds{token: "b-token"})
	r := &floodRound{outcomes: map[int]int{}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := replayOf(t, "web", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
		s.Behavior.ScaleDown = &setpointv1.ScalingRules{StabilizationWindowSeconds: ptr32(300)}
	})
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		on = make(chan struct{}) // closed while the flood runs; replaced when it stops
	)
	flooding := func() chan struct{} { mu.Lock(); defer mu.Unlock(); return on }
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				select {
				case <-flooding():
				case <-ctx.Done():
					return
				case <-time.After(10 * time.Millisecond):
					continue // the flood may have started on a newer channel
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/console/api/replay", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer platform-token")
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				r.outcomes[resp.StatusCode]++
				if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" {
					r.toldWhen++
				}
				mu.Unlock()
			}
		})
	}
	for i := range 4 {
		lat, cpu := &r.quiet, &r.quietCPU
		if i%2 == 1 {
			lat, cpu = &r.flooded, &r.floodCPU
			close(flooding())
			time.Sleep(d / 8) // let the flood build up
		}
		start, used := time.Now(), cpuTime(t)
		quietLoad(t, b, "b", d/2, lat)
		*cpu += (cpuTime(t) - used).Seconds() / time.Since(start).Seconds() / 2
		if i%2 == 1 {
			mu.Lock()
			on = make(chan struct{})
			mu.Unlock()
			time.Sleep(d / 8) // let the flood drain
		}
	}
	cancel()
	wg.Wait()
	return r
}

// cpuTime is the CPU time the process has used.
func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// String summarizes the round.
func (r *floodRound) String() string {
	return fmt.Sprintf("agent-b over gRPC: quiet p50 %v p99 %v (%d calls, the process using %.2f cores); under the replay flood p50 %v p99 %v (%d calls, %.2f cores), %.1f× the quiet p99; the flood's answers by HTTP status %v",
		r.quiet.quantile(0.5), r.quiet.quantile(0.99), r.quiet.len(), r.quietCPU, r.flooded.quantile(0.5), r.flooded.quantile(0.99), r.flooded.len(), r.floodCPU, r.ratio(), r.outcomes)
}

// ratio is agent-b's p99 under the flood over its quiet p99.
func (r *floodRound) ratio() float64 {
	return float64(r.flooded.quantile(0.99)) / float64(max(r.quiet.quantile(0.99), 1))
}

// TestConsoleReplayFlood (finding 3): a read-only principal floods the
// console with what-if replays while another tenant's agent calls over
// gRPC. Each replay is one Replay call, admitted as a Simulate (one of the
// principal's at a time, GOMAXPROCS/2 of all), so most are refused before
// anything is read, each refusal held (at most 250 ms) and answered 429
// with Retry-After; every call of the agent succeeds (quietLoad).
// Before the console came through the admission none was refused and the
// agent's p99 went to 1.6 s, 35× the quiet one; with the replay as three
// calls of which only the last was bounded, 14–51×. The p99 bound itself
// (10× the quiet p99) is a measurement, not this test: make replay-flood
// (BenchmarkConsoleReplayFlood).
func TestConsoleReplayFlood(t *testing.T) {
	r := replayFlood(t, noisyDuration(t))
	t.Log(r)
	if r.outcomes[http.StatusTooManyRequests] == 0 {
		t.Errorf("no replay of the flood was refused: %v", r.outcomes)
	}
	if r.outcomes[http.StatusOK] == 0 {
		t.Errorf("no replay of the flood was served: %v", r.outcomes)
	}
	if r.toldWhen != r.outcomes[http.StatusTooManyRequests] {
		t.Errorf("%d of %d refused replays said when to retry (Retry-After)", r.toldWhen, r.outcomes[http.StatusTooManyRequests])
	}
	for code := range r.outcomes {
		if code != http.StatusOK && code != http.StatusTooManyRequests {
			t.Errorf("the flood was answered %d: %v", code, r.outcomes)
		}
	}
}

// BenchmarkConsoleReplayFlood measures the fairness promise under a
// what-if replay flood (replayFlood, SETPOINT_NOISY_DURATION per window
// pair): each iteration is one round, logged; it reports agent-b's mean
// quiet and flood p99 and the median and largest ratio of the rounds
// (issue 28's bar: at most 10). make replay-flood runs rounds and checks
// the median.
func BenchmarkConsoleReplayFlood(b *testing.B) {
	d := noisyDuration(b)
	var ratios []float64
	var quietP99, floodP99 time.Duration
	for b.Loop() {
		r := replayFlood(b, d)
		quietP99, floodP99 = quietP99+r.quiet.quantile(0.99), floodP99+r.flooded.quantile(0.99)
		ratios = append(ratios, r.ratio())
		b.Logf("round %d: %v", len(ratios), r)
	}
	n := float64(len(ratios))
	b.ReportMetric(float64(quietP99.Microseconds())/1000/n, "quiet-p99-ms")
	b.ReportMetric(float64(floodP99.Microseconds())/1000/n, "flood-p99-ms")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
	b.ReportMetric(ratios[len(ratios)-1], "max-ratio")
}

func ptr32(v int32) *int32 { return &v }

// TestConsoleReplayBudgets (finding 4): a replay's spec passes the size
// budgets of a gRPC request: too many metrics, an oversized selector.
func TestConsoleReplayBudgets(t *testing.T) {
	e := startConsole(t, server.Options{})
	e.logDecisions(t, "web", 3)
	for _, tc := range []struct {
		name string
		edit func(*setpointv1.HorizontalPodAutoscalerSpec)
	}{
		{"60 metrics", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			for range 59 {
				s.Metrics = append(s.Metrics, s.Metrics[0])
			}
		}},
		{"a 64 KiB selector value with 1,000 labels", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			m := externalWithExpressions(1000, 1)
			m.External.Metric.Selector.MatchExpressions[0].Values[0] = strings.Repeat("v", 64<<10)
			s.Metrics = append(s.Metrics, m)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := consoleDo(t, http.MethodPost, e.url+"/console/api/replay", "platform-token", replayOf(t, "web", tc.edit), nil)
			if code != http.StatusBadRequest || !strings.Contains(string(body), "InvalidArgument") {
				t.Errorf("replay: %d %.300s, want 400 InvalidArgument", code, body)
			}
		})
	}
}

// TestConsoleRateLimit (finding 5): the console's calls spend the
// principal's rate tokens as gRPC calls do.
func TestConsoleRateLimit(t *testing.T) {
	e := startConsole(t, server.Options{RateLimit: 5, RateBurst: 5, Now: time.Now})
	codes := map[int]int{}
	for range 30 {
		code, _ := consoleDo(t, http.MethodGet, e.url+"/console/api/targets?cluster=b", "b-token", nil, nil)
		codes[code]++
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusOK] == 0 {
		t.Errorf("30 console calls at a rate limit of 5/s: %v, want some served and the rest 429", codes)
	}
}

// TestConsoleRequiresClientCert (finding 6): with RequireClientCert, a
// bearer token without a certificate — the admin's included — reads
// nothing through the console.
func TestConsoleRequiresClientCert(t *testing.T) {
	e := startConsole(t, server.Options{RequireClientCert: true})
	for _, path := range []string{"session", "targets", "target?cluster=b&namespace=shop&name=web"} {
		code, body := consoleDo(t, http.MethodGet, e.url+"/console/api/"+path, "b-token", nil, nil)
		if code != http.StatusUnauthorized {
			t.Errorf("GET %s with a token and no certificate: %d %.200s, want 401", path, code, body)
		}
	}
}

// TestConsoleWatchCountsStreams (finding 7): the console's event streams
// count against the principal's stream bound.
func TestConsoleWatchCountsStreams(t *testing.T) {
	const bound = 3
	e := startConsole(t, server.Options{MaxStreamsPerPrincipal: bound})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	for i := range bound + 1 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/console/api/watch?cluster=b", nil)
		req.Header.Set("Authorization", "Bearer b-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, resp)
		want := http.StatusOK
		if i == bound {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Errorf("event stream %d of one principal (bound %d): %s, want %d", i+1, bound, resp.Status, want)
		}
	}
}

// TestConsoleRefusalsPerAddress (finding 8): refused console requests
// (unknown tokens) are limited per browser address like gRPC's, and the
// audit log is sampled and names the address.
func TestConsoleRefusalsPerAddress(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	e := startConsole(t, server.Options{Logger: slog.New(slog.NewJSONHandler(w, nil)), PeerRateLimit: 5, PeerRateBurst: 5, Now: time.Now})
	codes := map[int]int{}
	for range 100 {
		code, _ := consoleDo(t, http.MethodGet, e.url+"/console/api/session", "unknown-token", nil, nil)
		codes[code]++
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("100 refused console requests from one address: %v, want most 429", codes)
	}
	mu.Lock()
	defer mu.Unlock()
	audits := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"audit"`) {
			audits++
			if !strings.Contains(line, `"peer":"127.0.0.1"`) {
				t.Errorf("an audit record without the browser's address: %s", line)
			}
		}
	}
	if audits == 0 || audits > 10 {
		t.Errorf("%d audit records for 100 refusals, want a sample (1 to 10)", audits)
	}
}

// writerFunc is an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestConsoleCSRF (finding 9): a replay is run only for a JSON request
// from the console's own origin.
func TestConsoleCSRF(t *testing.T) {
	e := startConsole(t, server.Options{})
	e.logDecisions(t, "web", 3)
	body := replayOf(t, "web", nil)
	for _, tc := range []struct {
		name string
		edit func(*http.Request)
		want int
	}{
		{"a form", func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, http.StatusBadRequest},
		{"text/plain", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, http.StatusBadRequest},
		{"another origin", func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, http.StatusForbidden},
		{"cross-site", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, http.StatusForbidden},
		{"same origin", func(r *http.Request) {
			r.Header.Set("Origin", "http://"+r.Host)
			r.Header.Set("Sec-Fetch-Site", "same-origin")
		}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, got := consoleDo(t, http.MethodPost, e.url+"/console/api/replay", "platform-token", body, tc.edit)
			if code != tc.want {
				t.Errorf("replay: %d %.200s, want %d", code, got, tc.want)
			}
		})
	}
}

// TestConsoleSessionAndHost (finding 10): the session reports the
// request's own TLS (a plaintext console of a TLS gRPC server says
// false), and without authentication the console answers loopback names
// only.
func TestConsoleSessionAndHost(t *testing.T) {
	e := startConsole(t, server.Options{})
	code, body := consoleDo(t, http.MethodGet, e.url+"/console/api/session", "b-token", nil, nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"tls":false`) {
		t.Errorf("session over plaintext HTTP: %d %s, want tls false", code, body)
	}

	dev := start(t, setup{})
	hs := httptest.NewServer(dev.srv.ConsoleHandler())
	t.Cleanup(hs.Close)
	for _, tc := range []struct {
		host string
		want int
	}{{"evil.example", http.StatusForbidden}, {"evil.example:80", http.StatusForbidden}, {"localhost:8080", http.StatusOK}, {"127.0.0.1", http.StatusOK}, {"[::1]:9", http.StatusOK}} {
		code, body := consoleDo(t, http.MethodGet, hs.URL+"/console/api/session", "", nil, func(r *http.Request) { r.Host = tc.host })
		if code != tc.want {
			t.Errorf("development mode, Host %s: %d %.200s, want %d", tc.host, code, body, tc.want)
		}
	}
}

// TestListDecisionsOutOfRangeTime (finding 11): a timestamp outside the
// representable range is InvalidArgument naming the field, without the
// protobuf package's "proto:" prefix.
func TestListDecisionsOutOfRangeTime(t *testing.T) {
	ts := start(t, setup{})
	_, err := ts.client(t).ListDecisions(t.Context(), &setpointv1.ListDecisionsRequest{Target: key("web"), StartTime: &timestamppb.Timestamp{Seconds: 1 << 40}})
	if status.Code(err) != codes.InvalidArgument || strings.Contains(status.Convert(err).Message(), "proto:") {
		t.Errorf("ListDecisions with start_time in year 36812: %v, want InvalidArgument without a proto: prefix", err)
	}
	checkBadRequest(t, err, "start_time")
}

// TestReplayService: the console's Replay over gRPC replays the logged
// decisions of the range (one step each, at their times) with the spec
// given and the target's settings; it is refused for a cluster the caller
// may not read, and a bad request names its field.
func TestReplayService(t *testing.T) {
	e := startConsole(t, server.Options{})
	e.logDecisions(t, "web", 20)
	conn := dial(t, e.ts.addr, withTLS(&tls.Config{RootCAs: e.f.serverCA.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}),
		grpc.WithPerRPCCredentials(bearer("platform-token")))
	c := consolev1.NewReplayServiceClient(conn)
	key := func(cluster string) *setpointv1.TargetKey {
		return &setpointv1.TargetKey{Cluster: cluster, Namespace: "shop", Name: "web"}
	}
	spec := request("web", 3, t0).GetSpec()
	// The log's decisions were made one a second from t0: [t0+5s, t0+15s)
	// holds ten.
	resp, err := c.Replay(t.Context(), &consolev1.ReplayRequest{Target: key("a"), Spec: spec,
		StartTime: timestamppb.New(t0.Add(5 * time.Second)), EndTime: timestamppb.New(t0.Add(15 * time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	var times []time.Time
	for _, s := range resp.GetResponse().GetSteps() {
		times = append(times, s.GetTime().AsTime())
	}
	var want []time.Time
	for i := 5; i < 15; i++ {
		want = append(want, t0.Add(time.Duration(i)*time.Second))
	}
	if d := cmp.Diff(want, times); d != "" {
		t.Errorf("replayed steps (-want +got):\n%s", d)
	}
	if n := len(resp.GetRequest().GetSteps()); n != 10 || resp.GetRequest().GetPodModel().GetInitialReplicas() == 0 {
		t.Errorf("the replay's request has %d steps and pod model %v, want 10 and the first decision's replicas", n, resp.GetRequest().GetPodModel())
	}

	if _, err := c.Replay(t.Context(), &consolev1.ReplayRequest{Target: key("b"), Spec: spec}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("replay of another cluster's target: %v, want PermissionDenied", err)
	}
	if _, err := c.Replay(t.Context(), &consolev1.ReplayRequest{Target: &setpointv1.TargetKey{Cluster: "a", Namespace: "shop", Name: "nope"}, Spec: spec}); status.Code(err) != codes.NotFound {
		t.Errorf("replay of an unknown target: %v, want NotFound", err)
	}
	_, err = c.Replay(t.Context(), &consolev1.ReplayRequest{Target: key("a")})
	checkBadRequest(t, err, "spec")
	_, err = c.Replay(t.Context(), &consolev1.ReplayRequest{Target: key("a"), Spec: spec, StartTime: &timestamppb.Timestamp{Seconds: 1 << 40}})
	checkBadRequest(t, err, "start_time")
	_, err = c.Replay(t.Context(), &consolev1.ReplayRequest{Target: key("a"), Spec: spec, StartTime: timestamppb.New(t0.Add(time.Hour))})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("replay of a range without decisions: %v, want FailedPrecondition", err)
	}
}

// TestReplayWithFallback (issue 32, try before enabling): a target whose
// metrics failed for a while is replayed with a fallback added to its
// spec; the replay proposes the fallback's count once the metrics have
// failed for its failure_duration, and never before, while the replay
// without it holds its count.
func TestReplayWithFallback(t *testing.T) {
	e := startConsole(t, server.Options{})
	for i := range 12 {
		req := request("flaky", 3, e.ts.clock.Now())
		req.Target.Cluster = "a"
		if i >= 4 {
			req.ResourceMetrics.Items = nil // the metrics API answers nothing
		}
		if _, err := e.agentA.Recommend(t.Context(), req); err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
		e.ts.clock.Step(15 * time.Second)
	}
	conn := dial(t, e.ts.addr, withTLS(&tls.Config{RootCAs: e.f.serverCA.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}),
		grpc.WithPerRPCCredentials(bearer("platform-token")))
	c := consolev1.NewReplayServiceClient(conn)
	replay := func(fallback *setpointv1.Fallback) []int32 {
		t.Helper()
		spec := request("flaky", 3, t0).GetSpec()
		spec.Fallback = fallback
		resp, err := c.Replay(t.Context(), &consolev1.ReplayRequest{Target: &setpointv1.TargetKey{Cluster: "a", Namespace: "shop", Name: "flaky"}, Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		for _, s := range resp.GetResponse().GetSteps() {
			out = append(out, s.GetDecision().GetDesiredReplicas())
		}
		return out
	}
	without := replay(nil)
	with := replay(&setpointv1.Fallback{Behavior: "static", Replicas: 30, FailureDuration: durationpb.New(30 * time.Second)})
	t.Logf("replayed without a fallback %v, with one (static 30 after 30 s) %v", without, with)
	// Decisions 0–3 had metrics; from 4 on they failed: at 4 and 5 the
	// failure is younger than 30 s, from 6 on the fallback applies.
	for i := range with {
		switch {
		case i < 6 && with[i] != without[i]:
			t.Errorf("decision %d differs before the fallback may apply: %d, without %d", i, with[i], without[i])
		case i >= 6 && with[i] != 30:
			t.Errorf("decision %d with the fallback = %d, want 30", i, with[i])
		}
	}
	if slices.Contains(without, 30) {
		t.Errorf("the replay without a fallback reached 30: %v", without)
	}
}
