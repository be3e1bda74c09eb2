package convert_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// FuzzRecommendRequest feeds arbitrary bytes through what the server does
// with a Recommend request: unmarshal, Validate, convert.Input, the engine
// (twice, the second time from the first decision's history and status),
// and the conversion of the decision back into a response. Any bytes must
// end in a decision or in an error the server answers InvalidArgument
// (*setpointv1.ValidationError or *engine.FieldError) — never a panic, an
// other error (Internal), or a response that cannot be marshalled.
func FuzzRecommendRequest(f *testing.F) {
	for _, req := range seedRequests(f) {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		req := &setpointv1.RecommendRequest{}
		if proto.Unmarshal(b, req) != nil {
			return // the gRPC codec answers these before any handler runs
		}
		if err := req.Validate(); err != nil {
			invalidArgument(t, "Validate", err)
			return
		}
		in, err := convert.Input(req, t0)
		if err != nil {
			invalidArgument(t, "Input", err)
			return
		}
		d, err := engine.Decide(in, engine.History{})
		if err != nil {
			invalidArgument(t, "Decide", err)
			return
		}
		respond(t, d)
		in.Now, in.Status = in.Now.Add(15*time.Second), d.Status
		d2, err := engine.Decide(in, d.History)
		if err != nil {
			t.Fatalf("second Decide of an input decided once: %v", err)
		}
		respond(t, d2)
	})
}

// invalidArgument fails unless err is one the server maps to
// InvalidArgument with field details.
func invalidArgument(t *testing.T, step string, err error) {
	t.Helper()
	var (
		ve *setpointv1.ValidationError
		fe *engine.FieldError
	)
	if !errors.As(err, &ve) && !errors.As(err, &fe) {
		t.Fatalf("%s: %T %v is not a validation error (the server would answer Internal)", step, err, err)
	}
}

// respond converts d as the Recommend handler does and marshals the
// response, as gRPC would.
func respond(t *testing.T, d engine.Decision) {
	t.Helper()
	resp := &setpointv1.RecommendResponse{Decision: convert.Decision(target.LastDecision{ID: "id", At: t0, Decision: d})}
	if _, err := proto.Marshal(resp); err != nil {
		t.Fatalf("response cannot be marshalled: %v", err)
	}
}

// seedRequests are the fuzzer's starting points: the minimal request, the
// documented example, and requests made from generated inputs.
func seedRequests(f *testing.F) []*setpointv1.RecommendRequest {
	reqs := []*setpointv1.RecommendRequest{minimalRequest()}
	if b, err := os.ReadFile("../../testdata/examples/recommend.json"); err == nil {
		req := &setpointv1.RecommendRequest{}
		if err := protojson.Unmarshal(b, req); err != nil {
			f.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	for i := range 4 {
		in := randomInput(rand.New(rand.NewPCG(uint64(i), uint64(i)*7919)))
		req, err := convert.Request(key, ref, in)
		if err != nil {
			f.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	return reqs
}
