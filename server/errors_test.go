package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestToStatus(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		code  codes.Code
		field string
	}{
		{"validation", &setpointv1.ValidationError{Violations: []setpointv1.FieldViolation{{Field: "spec.max_replicas", Description: "must be >= 1"}}}, codes.InvalidArgument, "spec.max_replicas"},
		{"engine field error", fmt.Errorf("decide: %w", &engine.FieldError{Field: "spec.minReplicas", Reason: "bad"}), codes.InvalidArgument, "spec.min_replicas"},
		{"engine field spelled otherwise in the API", &engine.FieldError{Field: "resourceMetrics.pods[1].containers[0].usage[cpu]", Reason: "bad"}, codes.InvalidArgument, `resource_metrics.items[1].containers[0].usage["cpu"]`},
		{"engine field grouped under the metric's source", &engine.FieldError{Field: "spec.metrics[2].target.utilization", Reason: "bad"}, codes.InvalidArgument, "spec.metrics[2]"},
		{"engine field of the stored status", &engine.FieldError{Field: "status.conditions[0].type", Reason: "secret detail"}, codes.Internal, ""},
		{"not found", fmt.Errorf("get: %w", store.ErrNotFound), codes.NotFound, ""},
		{"corrupt", &store.CorruptError{Err: errors.New("secret detail")}, codes.DataLoss, ""},
		{"closed", store.ErrClosed, codes.Unavailable, ""},
		{"store unavailable", fmt.Errorf("%w: secret detail", store.ErrUnavailable), codes.Unavailable, ""},
		{"stale", target.ErrStaleDecision, codes.FailedPrecondition, ""},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded, ""},
		{"anything else", errors.New("secret detail"), codes.Internal, ""},
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := status.Convert(toStatus(context.Background(), log, tt.err))
			if st.Code() != tt.code {
				t.Errorf("code = %v, want %v", st.Code(), tt.code)
			}
			if strings.Contains(st.Message(), "secret") {
				t.Errorf("message %q leaks an internal detail", st.Message())
			}
			if tt.field == "" {
				return
			}
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 && br.GetFieldViolations()[0].GetField() == tt.field {
					return
				}
			}
			t.Errorf("details %v do not name %s", st.Details(), tt.field)
		})
	}
}
