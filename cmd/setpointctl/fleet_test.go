package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"
)

// fleetExample is the fleet of testdata/fleet.yaml.
const fleetExample = "testdata/fleet.yaml"

// fleetSimulateExample is the what-if of testdata/fleet-simulate.json.
const fleetSimulateExample = "testdata/fleet-simulate.json"

// memberReport is member's report at now: n ready pods requesting 100m
// cpu each, each using util% of it.
func memberReport(member string, now time.Time, n int32, util int64) *setpointv1.FleetReport {
	r := &setpointv1.FleetReport{
		Member:          member,
		Scale:           &setpointv1.Scale{Replicas: n, StatusReplicas: n, Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	started := timestamppb.New(now.Add(-time.Hour))
	for i := range n {
		pod := fmt.Sprintf("web-%s-%d", member, i)
		r.Pods = append(r.Pods, &setpointv1.Pod{
			Name: pod, Phase: "Running", StartTime: started,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: started},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "100m"}}},
		})
		r.ResourceMetrics.Items = append(r.ResourceMetrics.Items, &setpointv1.PodMetrics{
			Pod: pod, Timestamp: timestamppb.New(now.Add(-10 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": fmt.Sprintf("%dm", util)}}},
		})
	}
	return r
}

// agentSync is what one member's agent reports at one step: its pods'
// cpu utilization (percent of their requests), and whether its cluster
// came back empty (its workload at 0 replicas).
type agentSync struct {
	util  int64
	empty bool
}

// fleetStory is the example's story, one entry per 15 s sync: the members
// whose agents report, and what. a, b and c run 4 pods each at the 60%
// target. The first report decides alone (the others have not reported
// yet; they are left out, and keep their replicas); from the second sync
// on the three are pooled. c's agent stops: c is left out once its last
// report is older than 45 s, its load moves to a and b (90%), and they
// scale up to carry it. c's cluster comes back empty: c takes its share
// back one pod per minute (the scale-down policy) while a and b are held.
// Each member reports the replicas its agent applied: its last share.
var fleetStory = func() []map[string]agentSync {
	all := func(util int64) map[string]agentSync {
		return map[string]agentSync{"a": {util, false}, "b": {util, false}, "c": {util, false}}
	}
	ab := func(util int64) map[string]agentSync {
		return map[string]agentSync{"a": {util, false}, "b": {util, false}}
	}
	story := []map[string]agentSync{all(60), all(60), ab(60), ab(60), ab(60), ab(90), ab(60), ab(60)}
	story = append(story, map[string]agentSync{"a": {60, false}, "b": {60, false}, "c": {0, true}})
	for range 12 {
		story = append(story, all(60))
	}
	return story
}()

// storyStart is the instant of the story's first step.
var storyStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// readFleetExample is testdata/fleet.yaml.
func readFleetExample(t testing.TB) *setpointv1.PutFleetRequest {
	t.Helper()
	req := &setpointv1.PutFleetRequest{}
	if err := readMessage(nil, fleetExample, req); err != nil {
		t.Fatal(err)
	}
	return req
}

// liveStory puts testdata/fleet.yaml through setpointctl into a real
// server and plays fleetStory against it as the members' agents would:
// at each step the members that report call Report with the replicas they
// run, then apply their share unless they were left out of the split (an
// agent then keeps its replicas). It calls check(i, addr, now) after step
// i, and returns the fleet after each step.
func liveStory(t *testing.T, check func(i int, addr string, now time.Time)) []*setpointv1.Fleet {
	t.Helper()
	clk := testkit.NewClock(storyStart)
	addr := startServerOpts(t, server.Options{Now: clk.Now})
	if _, err := ctlAt(t.Context(), addr, storyStart, "fleet", "put", "-f", fleetExample); err != nil {
		t.Fatal(err)
	}
	c, err := setpointclient.Dial(addr, setpointclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	put := readFleetExample(t)
	running := map[string]int32{"a": 4, "b": 4, "c": 4}
	var fleets []*setpointv1.Fleet
	for i, step := range fleetStory {
		now := storyStart.Add(time.Duration(i) * 15 * time.Second)
		clk.Set(now)
		for _, m := range []string{"a", "b", "c"} {
			s, ok := step[m]
			if !ok {
				continue
			}
			if s.empty {
				running[m] = 0
			}
			r := memberReport(m, now, running[m], s.util)
			resp, err := c.Report(t.Context(), &setpointv1.ReportRequest{Fleet: put.GetFleet(), Report: r})
			if err != nil {
				t.Fatalf("step %d: %s reports: %v", i, m, err)
			}
			if sh := resp.GetShare(); sh != nil && sh.GetReason() != "Excluded" {
				running[m] = sh.GetReplicas()
			}
		}
		f, err := c.Fleet(t.Context(), put.GetFleet())
		if err != nil {
			t.Fatal(err)
		}
		fleets = append(fleets, f)
		if check != nil {
			check(i, addr, now)
		}
	}
	return fleets
}

// compactSteps writes a SimulateFleetRequest in JSON with its spec
// indented and each report on one line, so the file reads step by step.
func compactSteps(t *testing.T, req *setpointv1.SimulateFleetRequest) []byte {
	t.Helper()
	var spec bytes.Buffer
	if err := printMessage(&spec, "json", req.GetSpec()); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("{\n\"spec\": " + strings.TrimSpace(spec.String()) + ",\n\"steps\": [\n")
	for i, st := range req.GetSteps() {
		fmt.Fprintf(&b, "  {\"time\": %q, \"reports\": [\n", st.GetTime().AsTime().UTC().Format(time.RFC3339))
		for j, r := range st.GetReports() {
			line, err := protojson.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, line); err != nil {
				t.Fatal(err)
			}
			b.WriteString("    " + compact.String())
			if j < len(st.GetReports())-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString("  ]}")
		if i < len(req.GetSteps())-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("]}\n")
	return b.Bytes()
}

// TestFleetCommands plays the example's story against a real server and
// reads the fleet through setpointctl as it goes: what docs/fleets.md
// says of each moment of the story (everyone pooled and split by weight;
// c stale, left out, a and b carrying the total; c back, paced by the
// scale-down policy while a and b are held; c's share back), in the words
// fleet explain and fleet list -o wide use. The moments are found in the
// live fleet (when each happens depends on the engine's decisions), and
// the story must reach every one.
func TestFleetCommands(t *testing.T) {
	ctx := t.Context()
	var now time.Time // the step's, for setpointctl's ages
	out := func(addr string, args ...string) string {
		t.Helper()
		s, err := ctlAt(ctx, addr, now, args...)
		if err != nil {
			t.Fatalf("setpointctl %v: %v", args, err)
		}
		return s
	}
	seen := map[string]bool{}
	var live, storyAddr string
	fleets := liveStory(t, func(i int, addr string, at time.Time) {
		now, storyAddr = at, addr
		f, err := setpointclient.Dial(addr, setpointclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fl, err := f.Fleet(ctx, setpointclient.FleetKey("shop", "web"))
		if err != nil {
			t.Fatal(err)
		}
		wide := out(addr, "fleet", "list", "-o", "wide")
		ex := out(addr, "fleet", "explain", "shop/web")
		reasons := map[string]string{}
		for _, sh := range fl.GetSplit().GetShares() {
			reasons[sh.GetMember()] = sh.GetReason() + sh.GetExclusion()
		}
		var moment string
		var want []string
		switch {
		case i == 0:
			moment = "first report"
			want = []string{"b excluded (NoReport), c excluded (NoReport)",
				"Left out of the last decision's pool (their pods, metrics and replicas not counted):\n  - b (NoReport)"}
		case reasons["a"] == "Weighted" && reasons["b"] == "Weighted" && reasons["c"] == "Weighted" && !seen["c stale"]:
			moment = "pooled"
			want = []string{"Fleet shop/web scales Deployment/web between 3 and 30 replicas in total over 3 members (a, b, c).",
				"Every member was pooled in the last decision.", "  - a (weight 1): 4 replicas (Weighted): weight 1 of 3: quota 12×1/3 = 4."}
		case reasons["c"] == "ExcludedStale":
			moment = "c stale"
			want = []string{"(Weighted), b", "c excluded (Stale)",
				"  - c (weight 1, max 10): no replicas (Excluded): left out (Stale)",
				"Left out of the last decision's pool (their pods, metrics and replicas not counted):\n  - c (Stale): report "}
		case reasons["c"] == "Returning":
			moment = "c returning"
			c := splitShare(fl, "c")
			want = []string{fmt.Sprintf("c %d (Returning)", c.GetReplicas()),
				fmt.Sprintf("  - c (weight 1, max 10): %s (Returning, weighted share %d): returning: %d of its weighted share %d, what the held members release so far",
					replicas(c.GetReplicas()), c.GetWeighted(), c.GetReplicas(), c.GetWeighted()),
				"a returning member takes its share back as the scale-down policy lets the others fall"}
			for _, m := range []string{"a", "b"} {
				if sh := splitShare(fl, m); sh.GetReason() == "Held" {
					want = append(want, fmt.Sprintf("  - %s (weight 1): %s (Held, weighted share %d): held at %d above its weighted share %d while a member returns: the scale-down policy lets it fall from ",
						m, replicas(sh.GetReplicas()), sh.GetWeighted(), sh.GetReplicas(), sh.GetWeighted()))
				}
			}
			if !seen[moment] {
				live = "$ setpointctl fleet explain shop/web\n" + ex + "$ setpointctl fleet get shop/web -o wide\n" + out(addr, "fleet", "get", "shop/web", "-o", "wide")
			}
		case reasons["a"] == "Weighted" && reasons["c"] == "Weighted" && seen["c returning"]:
			moment = "c back"
			want = []string{"(Weighted), b ", "(Weighted), c ", "Every member was pooled in the last decision."}
		}
		d := fl.GetLastDecision()
		t.Logf("step %d (%s): decision %d → %d (rescale %v), split %s", i, moment, d.GetExplanation().GetCurrentReplicas(), d.GetDesiredReplicas(), d.GetRescale(), sharesText(fl.GetSplit()))
		if moment == "" {
			return
		}
		seen[moment] = true
		for _, w := range want {
			if !strings.Contains(wide+ex, w) {
				t.Errorf("step %d (%s): fleet list -o wide and fleet explain printed\n%s%s\nwant them to contain %q", i, moment, wide, ex, w)
			}
		}
	})
	for _, m := range []string{"first report", "pooled", "c stale", "c returning", "c back"} {
		if !seen[m] {
			t.Errorf("the story never reached the moment %q", m)
		}
	}
	golden(t, filepath.Join("testdata", "golden", "fleet-explain-live.txt"), live)
	seededWhatIf(t, storyAddr, now)

	// The last fleet through every output, then deleted.
	addr := startServerOpts(t, server.Options{Now: func() time.Time { return now }})
	last := fleets[len(fleets)-1]
	if _, err := ctlAt(ctx, addr, now, "fleet", "put", "-f", fleetExample); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "yaml"} {
		b := []byte(out(addr, "fleet", "list", "-o", format))
		if format == "yaml" {
			var err error
			if b, err = yaml.YAMLToJSON(b); err != nil {
				t.Fatal(err)
			}
		}
		var resp setpointv1.ListFleetsResponse
		if err := protojson.Unmarshal(b, &resp); err != nil || len(resp.GetFleets()) != 1 || !proto.Equal(resp.GetFleets()[0].GetSpec(), last.GetSpec()) {
			t.Errorf("fleet list -o %s: %v, %d fleets\n%s", format, err, len(resp.GetFleets()), b)
		}
	}
	if s := out(addr, "fleet", "delete", "shop/web"); s != "fleet shop/web deleted\n" {
		t.Errorf("fleet delete printed %q", s)
	}
	_, err := ctlAt(ctx, addr, now, "fleet", "get", "shop/web")
	if !errors.Is(err, setpointclient.ErrFleetNotFound) || !strings.Contains(err.Error(), "'setpointctl fleet list' shows the fleets") {
		t.Errorf("fleet get after delete: %v, want fleet not found with a hint", err)
	}
}

// storyWhatIf is the story as a what-if, played through SimulateFleet at
// addr as the members' agents would play it: each step's reports carry
// the replicas the member runs, its share in the simulation's previous
// step (unless it was left out: it then keeps its replicas).
func storyWhatIf(t *testing.T, addr string) *setpointv1.SimulateFleetRequest {
	t.Helper()
	c, err := setpointclient.Dial(addr, setpointclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := &setpointv1.SimulateFleetRequest{Spec: readFleetExample(t).GetSpec()}
	running := map[string]int32{"a": 4, "b": 4, "c": 4}
	for i, step := range fleetStory {
		now := storyStart.Add(time.Duration(i) * 15 * time.Second)
		st := &setpointv1.SimulateFleetStep{Time: timestamppb.New(now)}
		for _, m := range []string{"a", "b", "c"} {
			if s, ok := step[m]; ok {
				if s.empty {
					running[m] = 0
				}
				st.Reports = append(st.Reports, memberReport(m, now, running[m], s.util))
			}
		}
		req.Steps = append(req.Steps, st)
		resp, err := c.SimulateFleet(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range st.GetReports() {
			if sh := setpointclient.Share(resp.GetSteps()[i].GetSplit(), r.GetMember()); sh != nil && sh.GetReason() != "Excluded" {
				running[r.GetMember()] = sh.GetReplicas()
			}
		}
	}
	return req
}

// TestFleetSimulate: testdata/fleet-simulate.json is the story's what-if
// (storyWhatIf; go test -run TestFleetSimulate -update rewrites it), and
// fleet simulate of it prints the step table of testdata/golden, in which
// the story's moments show: every member pooled and weighted, c left out
// as stale while a and b carry the total, c returning while the others
// are held, every member weighted again.
func TestFleetSimulate(t *testing.T) {
	addr := startServerOpts(t, server.Options{})
	whatIf := storyWhatIf(t, addr)
	if *update {
		if err := os.WriteFile(fleetSimulateExample, compactSteps(t, whatIf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := &setpointv1.SimulateFleetRequest{}
	if err := readMessage(nil, fleetSimulateExample, file); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(whatIf, file, protocmp.Transform()); diff != "" {
		t.Fatalf("%s is not the story's what-if (-update rewrites it) (-story +file):\n%s", fleetSimulateExample, diff)
	}
	got, err := ctl(t.Context(), addr, "fleet", "simulate", "-f", fleetSimulateExample, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	resp := &setpointv1.SimulateFleetResponse{}
	if err := protojson.Unmarshal([]byte(got), resp); err != nil {
		t.Fatal(err)
	}
	var moments []string
	for _, st := range resp.GetSteps() {
		r := map[string]string{}
		for _, sh := range st.GetSplit().GetShares() {
			r[sh.GetMember()] = sh.GetReason() + sh.GetExclusion()
		}
		m := ""
		switch {
		case r["a"] == "Weighted" && r["b"] == "Weighted" && r["c"] == "Weighted":
			m = "all weighted"
		case r["a"] == "Weighted" && r["b"] == "Weighted" && r["c"] == "ExcludedStale":
			m = "c stale"
		case r["c"] == "Returning" && (r["a"] == "Held" || r["b"] == "Held"):
			m = "c returning"
		}
		if m != "" && (len(moments) == 0 || moments[len(moments)-1] != m) {
			moments = append(moments, m)
		}
	}
	if diff := cmp.Diff([]string{"all weighted", "c stale", "c returning", "all weighted"}, moments); diff != "" {
		t.Errorf("the what-if's moments (-story +simulated):\n%s", diff)
	}
	table, err := ctl(t.Context(), addr, "fleet", "simulate", "-f", fleetSimulateExample)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := printFleetSimulation(&want, resp.GetSteps(), false); err != nil {
		t.Fatal(err)
	}
	if table != want.String() {
		t.Errorf("fleet simulate's table is not the table of -o json's answer:\n%s\nwant\n%s", table, want.String())
	}
	golden(t, filepath.Join("testdata", "golden", "fleet-simulate-example.txt"), "$ setpointctl fleet simulate -f cmd/setpointctl/"+fleetSimulateExample+"\n"+table)
}

// seededWhatIf asks the story's server, after the story (at now), what
// the fleet would do if a and b reported and c did not: fleet simulate
// --seed-from starts from the stored fleet, whose c reported at now, so c
// is pooled at the first step; without the seed c has no report and is
// left out.
func seededWhatIf(t *testing.T, addr string, now time.Time) {
	t.Helper()
	req := &setpointv1.SimulateFleetRequest{Spec: readFleetExample(t).GetSpec()}
	at := now.Add(15 * time.Second)
	req.Steps = []*setpointv1.SimulateFleetStep{{Time: timestamppb.New(at),
		Reports: []*setpointv1.FleetReport{memberReport("a", at, 4, 60), memberReport("b", at, 4, 60)}}}
	file := filepath.Join(t.TempDir(), "what-if.json")
	var buf bytes.Buffer
	if err := printMessage(&buf, "json", req); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want *regexp.Regexp
	}{
		{nil, regexp.MustCompile(` 2/3 .* c excluded \(NoReport\)`)},
		{[]string{"--seed-from", "shop/web"}, regexp.MustCompile(` 3/3 .* c [1-9][0-9]* \(Weighted\)`)},
	} {
		out, err := ctlAt(t.Context(), addr, now, append([]string{"fleet", "simulate", "-f", file}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if !tc.want.MatchString(out) {
			t.Errorf("fleet simulate %v printed\n%s\nwant it to match %s", tc.args, out, tc.want)
		}
	}
}

// splitShare is member's share in f's last split.
func splitShare(f *setpointv1.Fleet, member string) *setpointv1.FleetShare {
	return setpointclient.Share(f.GetSplit(), member)
}
