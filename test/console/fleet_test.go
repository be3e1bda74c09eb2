package console_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func (e *env) fleetClient(t *testing.T, token string) setpointv1.FleetServiceClient {
	t.Helper()
	return setpointv1.NewFleetServiceClient(e.conn(t, token))
}

// fleetKey is the test's fleet: web in shop, over clusters a, b and c.
var fleetKey = &setpointv1.FleetKey{Namespace: "shop", Name: "web"}

// fleetSpec is the test fleet's spec: webSpec's autoscaler over the total,
// members a, b and c of equal weight, c at most 10, a member left out
// 45 s after its last report, and returns paced one pod per minute.
func fleetSpec() *setpointv1.FleetSpec {
	a := webSpec("web")
	a.Behavior.ScaleDown.Policies = []*setpointv1.ScalingPolicy{{Type: "Pods", Value: 1, PeriodSeconds: 60}}
	return &setpointv1.FleetSpec{
		Autoscaler: a,
		Members: []*setpointv1.FleetMember{
			{Cluster: "a", Weight: 1}, {Cluster: "b", Weight: 1}, {Cluster: "c", Weight: 1, MaxReplicas: ptr[int32](10)},
		},
		StaleAfter: durationpb.New(45 * time.Second),
	}
}

// member is one member cluster's agent: its workload's replicas.
type member struct {
	name     string
	replicas int32
}

// report sends m's report at the server's clock, its pods using util% of
// their 1 cpu requests, and applies its share unless it was left out.
func (e *env) report(t *testing.T, c setpointv1.FleetServiceClient, m *member, util int64) {
	t.Helper()
	now := e.clock.Now()
	r := &setpointv1.FleetReport{
		Member:          m.name,
		Scale:           &setpointv1.Scale{Replicas: m.replicas, StatusReplicas: m.replicas, Selector: "app=web"},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	started := timestamppb.New(now.Add(-time.Hour))
	for i := range m.replicas {
		pod := fmt.Sprintf("web-%s-%d", m.name, i)
		r.Pods = append(r.Pods, &setpointv1.Pod{
			Name: pod, Phase: "Running", StartTime: started,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: started},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "1"}}},
		})
		r.ResourceMetrics.Items = append(r.ResourceMetrics.Items, &setpointv1.PodMetrics{
			Pod: pod, Timestamp: timestamppb.New(now.Add(-10 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": fmt.Sprintf("%dm", util*10)}}},
		})
	}
	resp, err := c.Report(t.Context(), &setpointv1.ReportRequest{Fleet: fleetKey, Report: r})
	if err != nil {
		t.Fatalf("%s reports: %v", m.name, err)
	}
	if sh := resp.GetShare(); sh != nil && sh.GetReason() != "Excluded" {
		m.replicas = sh.GetReplicas()
	}
}

// TestConsoleFleet shows a fleet in the console: the list next to the
// targets, and the fleet's page with its decision, its split (each
// member's share, reason and sentence, as GetFleet answers them) and why
// a member was left out; the page follows the fleet as members report;
// a principal who may not read every member cluster does not see it.
func TestConsoleFleet(t *testing.T) {
	e := startServer(t)
	admin := e.fleetClient(t, tokenAdmin)
	if _, err := admin.PutFleet(t.Context(), &setpointv1.PutFleetRequest{Fleet: fleetKey, Spec: fleetSpec()}); err != nil {
		t.Fatal(err)
	}
	a, b, c := &member{"a", 4}, &member{"b", 4}, &member{"c", 4}
	// Two syncs with every member, then c's agent stops and the load
	// moves to a and b: c is left out once its report is 45 s old.
	for i := range 7 {
		util := int64(50)
		if i >= 5 {
			util = 70
		}
		for _, m := range []*member{a, b, c} {
			if m == c && i >= 2 {
				continue
			}
			e.report(t, admin, m, util)
		}
		e.clock.Step(15 * time.Second)
	}
	get := func() *setpointv1.Fleet {
		resp, err := admin.GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetFleet()
	}
	f := get()
	if sh := f.GetSplit().GetShares(); len(sh) != 3 || sh[2].GetExclusion() != "Stale" {
		t.Fatalf("the scenario did not leave c out: %v", f.GetSplit().GetMessage())
	}
	br := browser(t)

	t.Run("list", func(t *testing.T) {
		for _, tc := range []struct {
			name, token string
			want        []string
		}{
			{"admin", tokenAdmin, []string{"shop/web"}},
			{"agent-b, a member", tokenAgentB, []string{"shop/web"}},
			{"platform-a, not every member", tokenPlatformA, []string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := tab(t, br, e.base, tc.token, "/?sort=name")
				do(t, ctx, "fleet list", chromedp.WaitVisible("#fleet-list"))
				got := evalStrings(t, ctx, `[...document.querySelectorAll('#fleet-list tr[data-fleet]')].map(r => r.dataset.fleet)`)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("fleets listed (-want +got):\n%s", diff)
				}
				if len(tc.want) > 0 {
					shares := evalStrings(t, ctx, `[document.querySelector('#fleet-list tr[data-fleet] td.shares').textContent]`)[0]
					if !strings.Contains(shares, "c excluded (Stale)") {
						t.Errorf("the list's shares %q do not say c was left out as stale", shares)
					}
				}

			})
		}
	})

	t.Run("fleet page", func(t *testing.T) {
		ctx := tab(t, br, e.base, tokenAdmin, "/")
		do(t, ctx, "open the fleet from the list",
			chromedp.WaitVisible(`#fleet-list a[href="#/f/shop/web"]`),
			chromedp.Click(`#fleet-list a[href="#/f/shop/web"]`),
			chromedp.WaitVisible("#shares"),
		)
		f := get()
		checkSplit(t, ctx, f)
		out := evalStrings(t, ctx, `[...document.querySelectorAll('#member-list tr[data-member]')].map(r => r.dataset.member + ":" + r.dataset.pooled + ":" + r.dataset.exclusion)`)
		var want []string
		for _, m := range f.GetMembers() {
			want = append(want, fmt.Sprintf("%s:%v:%s", m.GetMember(), m.GetPooled(), m.GetExclusion()))
		}
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("members' pool (-GetFleet +page):\n%s", diff)
		}
		why := evalStrings(t, ctx, `[document.querySelector('#member-list tr[data-member=c] td.explain').textContent, document.querySelector('#left-out').textContent]`)
		if !strings.Contains(why[0], f.GetMembers()[2].GetMessage()) || !strings.Contains(why[1], "1 of 3 members left out") {
			t.Errorf("the page says of c %q and of the pool %q, want GetFleet's %q and one member left out", why[0], why[1], f.GetMembers()[2].GetMessage())
		}
		d := f.GetLastDecision()
		said := evalStrings(t, ctx, `[document.querySelector('#fleet-replicas').textContent, document.querySelector('#fleet-explain').textContent]`)
		if w := fmt.Sprintf("%d → %d", d.GetExplanation().GetCurrentReplicas(), d.GetDesiredReplicas()); said[0] != w {
			t.Errorf("the decision shown is %q, want %q", said[0], w)
		}
		if !strings.Contains(said[1], "cpu resource at ") {
			t.Errorf("the decision is not explained: %q", said[1])
		}
		var rescales []string
		for _, ev := range f.GetHistory().GetScaleUpEvents() {
			rescales = append(rescales, fmt.Sprintf("+%d", ev.GetChange()))
		}
		shown := evalStrings(t, ctx, `[...document.querySelectorAll('#fleet-rescales li')].map(li => li.textContent.replace(/^.*: /, ""))`)
		if len(rescales) == 0 || len(shown) != len(rescales)+len(f.GetHistory().GetScaleDownEvents()) || !slices.Contains(shown, rescales[len(rescales)-1]) {
			t.Errorf("the page lists the rescales %v, want the history's scale-up events %v (and its %d scale-downs)", shown, rescales, len(f.GetHistory().GetScaleDownEvents()))
		}

		// c's cluster comes back empty: the page, left open, shows c
		// returning as the fleet splits it.
		c.replicas = 0
		for range 2 {
			for _, m := range []*member{a, b, c} {
				e.report(t, admin, m, 50)
			}
			e.clock.Step(15 * time.Second)
		}
		f = get()
		if sh := f.GetSplit().GetShares()[2]; sh.GetReason() != "Returning" {
			t.Fatalf("c is not returning: %s", f.GetSplit().GetMessage())
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#shares tr[data-member=c]').dataset.reason === "Returning"`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Fatalf("the open page did not follow c's return: %v", err)
		}
		checkSplit(t, ctx, f)
		screenshot(t, ctx, "console-fleet")
	})

	t.Run("a principal who may not read every member", func(t *testing.T) {
		ctx := tab(t, br, e.base, tokenPlatformA, "/f/shop/web")
		do(t, ctx, "refused", chromedp.WaitVisible(".panel .error"))
		msg := evalStrings(t, ctx, `[document.querySelector('.panel .error').textContent]`)[0]
		if msg != "No fleet shop/web that this identity may read." {
			t.Errorf("the page says %q", msg)
		}
		// A name without its namespace names no fleet.
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(async () => { const r = await fetch("/console/api/fleets?name=web", {headers: {Authorization: "Bearer "+sessionStorage.getItem("setpoint-token")}}); return [String(r.status), (await r.json()).code]; })()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"400", "InvalidArgument"}, got); diff != "" {
			t.Errorf("fleets?name=web without a namespace (-want +got):\n%s", diff)
		}
	})
}

// checkSplit compares the split the page shows with f's: each member's
// share, reason and sentence, and the total.
func checkSplit(t *testing.T, ctx context.Context, f *setpointv1.Fleet) {
	t.Helper()
	var want []string
	for _, sh := range f.GetSplit().GetShares() {
		want = append(want, fmt.Sprintf("%s %d %s: %s", sh.GetMember(), sh.GetReplicas(), sh.GetReason(), sh.GetMessage()))
	}
	got := evalStrings(t, ctx, `[...document.querySelectorAll('#shares tr[data-member]')].map(r => r.dataset.member + " " + r.dataset.replicas + " " + r.dataset.reason + ": " + r.querySelector('td.explain').textContent)`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the split's shares (-GetFleet +page):\n%s", diff)
	}
	total := evalStrings(t, ctx, `[document.querySelector('#split-total').textContent, document.querySelector('#split-message').textContent]`)
	if total[0] != fmt.Sprint(f.GetSplit().GetTotal()) || total[1] != f.GetSplit().GetMessage() {
		t.Errorf("the page shows a total of %s (%q), want %d (%q)", total[0], total[1], f.GetSplit().GetTotal(), f.GetSplit().GetMessage())
	}
}
