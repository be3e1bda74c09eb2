package convert_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
)

// TestInputInKeepsNothing checks the lifetime rule of convert.Scratch: an
// input converted into a Scratch equals the one Input converts, and a
// decision made from it (with target.Decide, as Recommend makes it) keeps
// nothing of the Scratch's memory: the record is the same after the
// Scratch is reset and overwritten by other requests.
func TestInputInKeepsNothing(t *testing.T) {
	reqs := map[string]*setpointv1.RecommendRequest{"bench": benchRequest(10), "bench-100": benchRequest(100)}
	rich, err := convert.Request(key, ref, richInput())
	if err != nil {
		t.Fatal(err)
	}
	reqs["rich"] = rich
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		req, err := convert.Request(key, ref, randomInput(r))
		if err != nil {
			t.Fatal(err)
		}
		reqs["random-"+string(rune('a'+i))] = req
	}
	var s convert.Scratch
	for name, req := range reqs {
		t.Run(name, func(t *testing.T) {
			want, err := convert.Input(req, t0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := convert.InputIn(req, t0, &s)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmpOpt); diff != "" {
				t.Fatalf("InputIn differs from Input (-want +got):\n%s", diff)
			}
			decide := func(in engine.Input) target.Record {
				rec := target.Record{}
				// Twice: the second decision starts from the first one's
				// status and history.
				for i := range 2 {
					if err := target.Decide(&rec, target.Input{Ref: ref, Engine: in}, "id", t0.Add(time.Duration(i)*time.Minute)); err != nil {
						t.Fatal(err)
					}
				}
				return rec
			}
			wantRec, gotRec := decide(want), decide(got)
			s.Reset()
			for _, other := range reqs { // overwrite what Reset cleared
				if _, err := convert.InputIn(other, t0.Add(time.Hour), &s); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(wantRec, gotRec, cmpOpt); diff != "" {
				t.Errorf("the record decided from the Scratch changed with it (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInputInInvalid checks that a Scratch holding an earlier input gives
// the same violations as Input for an invalid request, and then converts
// valid requests as Input does.
func TestInputInInvalid(t *testing.T) {
	var s convert.Scratch
	if _, err := convert.InputIn(benchRequest(10), t0, &s); err != nil {
		t.Fatal(err)
	}
	bad := benchRequest(3)
	bad.Pods[1].Containers[0].Requests["cpu"] = "lots"
	bad.Observations[1].Values[0].Value = "-"
	_, want := convert.Input(bad, t0)
	_, got := convert.InputIn(bad, t0, &s)
	if want == nil || got == nil || want.Error() != got.Error() {
		t.Fatalf("InputIn error %v, Input error %v: want the same violations", got, want)
	}
	req := benchRequest(2)
	wantIn, _ := convert.Input(req, t0)
	gotIn, err := convert.InputIn(req, t0, &s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantIn, gotIn, cmpOpt); diff != "" {
		t.Errorf("after an invalid request, InputIn differs from Input (-want +got):\n%s", diff)
	}
}
