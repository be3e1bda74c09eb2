package convert_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
)

// aheadWindows are three windows in three zones; at t0 only "berlin" is
// open.
func aheadWindows() []*setpointv1.ScheduleWindow {
	return []*setpointv1.ScheduleWindow{
		{Name: "berlin", TimeZone: "Europe/Berlin", Start: "0 8 * * *", End: "0 18 * * *", MinReplicas: 12},
		{Name: "new-york", TimeZone: "America/New_York", Start: "0 9 * * 1-5", End: "0 17 * * 1-5", MinReplicas: 14},
		{Name: "tokyo", TimeZone: "Asia/Tokyo", Start: "30 8 * * *", Duration: durationpb.New(2 * time.Hour), MinReplicas: 10},
	}
}

// Input turns the open windows into proposals at now and leaves a spec
// without fallback and schedules as it was; Fallback resolves the
// behavior's spelling, empty meaning static.
func TestInputAhead(t *testing.T) {
	plain := benchRequest(4)
	in, err := convert.Input(plain, t0)
	if err != nil {
		t.Fatal(err)
	}
	if in.Proposals != nil || convert.Fallback(plain.Spec) != nil {
		t.Errorf("a spec without fallback and schedules: proposals %v, fallback %v", in.Proposals, convert.Fallback(plain.Spec))
	}
	req := proto.Clone(plain).(*setpointv1.RecommendRequest)
	req.Spec.Schedules = aheadWindows()
	req.Spec.Fallback = &setpointv1.Fallback{FailureDuration: durationpb.New(45 * time.Second), Replicas: 9}
	in, err = convert.Input(req, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Proposals) != 1 || in.Proposals[0].Name != "schedule berlin" || in.Proposals[0].Kind != engine.ProposalSchedule || in.Proposals[0].Replicas != 12 {
		t.Errorf("proposals at %s: %+v; want berlin's 12 alone", t0, in.Proposals)
	}
	want := target.Fallback{After: 45 * time.Second, Behavior: target.FallbackStatic, Replicas: 9}
	if f := convert.Fallback(req.Spec); f == nil || *f != want {
		t.Errorf("Fallback = %+v, want %+v", f, want)
	}
	req.Spec.Fallback.Behavior = "often"
	if f := convert.Fallback(req.Spec); f != nil {
		t.Errorf("Fallback of an invalid behavior = %+v, want nil", f)
	}
}

// BenchmarkInputAhead is what fallback and schedules add to converting a
// request (100 pods, into a Scratch): the schedule is compiled and
// evaluated per request.
func BenchmarkInputAhead(b *testing.B) {
	for _, tc := range []struct {
		name string
		edit func(*setpointv1.HorizontalPodAutoscalerSpec)
	}{
		{"none", func(*setpointv1.HorizontalPodAutoscalerSpec) {}},
		{"fallback", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			s.Fallback = &setpointv1.Fallback{FailureDuration: durationpb.New(time.Minute), Replicas: 9}
		}},
		{"fallback+3windows", func(s *setpointv1.HorizontalPodAutoscalerSpec) {
			s.Fallback = &setpointv1.Fallback{FailureDuration: durationpb.New(time.Minute), Replicas: 9}
			s.Schedules = aheadWindows()
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := benchRequest(100)
			tc.edit(req.Spec)
			var s convert.Scratch
			b.ReportAllocs()
			for b.Loop() {
				if _, err := convert.InputIn(req, t0, &s); err != nil {
					b.Fatal(err)
				}
				convert.Fallback(req.Spec)
				s.Reset()
			}
		})
	}
}

// The spec fields shown in docs/ahead-of-load.md ("In the API") parse and
// convert.
func TestAheadDocExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/ahead-of-load.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## In the API")
	_, rest, ok2 := strings.Cut(rest, "```json\n")
	fields, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/ahead-of-load.md shows no JSON example under In the API")
	}
	spec := &setpointv1.HorizontalPodAutoscalerSpec{}
	if err := protojson.Unmarshal([]byte(`{"maxReplicas": 30, `+fields+`}`), spec); err != nil {
		t.Fatalf("the documented fields: %v", err)
	}
	a, err := convert.AheadOf("spec", spec)
	if err != nil || a.Fallback == nil || a.Schedule == nil {
		t.Errorf("AheadOf(the documented fields) = %+v, %v; want a fallback and a schedule", a, err)
	}
}

// The forecast shown in docs/ahead-of-load.md ("Forecasts in the API")
// parses, and its lead time is pod_startup + 15 s, or the spec's lead
// time without pod_startup.
func TestForecastDocExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/ahead-of-load.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "### Forecasts in the API")
	_, rest, ok2 := strings.Cut(rest, "```json\n")
	fields, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/ahead-of-load.md shows no JSON example under Forecasts in the API")
	}
	req := &setpointv1.RecommendRequest{}
	if err := protojson.Unmarshal([]byte("{"+fields+"}"), req); err != nil {
		t.Fatalf("the documented fields: %v", err)
	}
	if cfg := convert.Forecast(req); cfg == nil || cfg.Lead != 110*time.Second || cfg.MaxError != 0.2 {
		t.Errorf("Forecast(the documented request) = %+v; want lead 110s, max error 0.2", cfg)
	}
	req.PodStartup = nil
	if cfg := convert.Forecast(req); cfg == nil || cfg.Lead != 330*time.Second {
		t.Errorf("without pod_startup: %+v; want lead 330s", cfg)
	}
	req.Spec.Forecast = nil
	if cfg := convert.Forecast(req); cfg != nil {
		t.Errorf("without spec.forecast: %+v; want nil", cfg)
	}
}
