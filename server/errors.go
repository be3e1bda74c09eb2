package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"unicode"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors of the service, mapped by toStatus.
var (
	// errOverloaded: too many Recommend calls are in flight.
	errOverloaded = errors.New("server: too many recommendations in flight")
)

// toStatus maps an error of a handler to the gRPC status the caller sees.
// Internal details are logged, never sent.
func toStatus(ctx context.Context, log *slog.Logger, err error) error {
	var (
		ve *setpointv1.ValidationError
		fe *engine.FieldError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ve):
		return badRequest(ve.Violations)
	case errors.As(err, &fe):
		return badRequest([]setpointv1.FieldViolation{{Field: apiField(fe.Field), Description: fe.Reason}})
	case errors.Is(err, store.ErrNotFound), errors.Is(err, target.ErrNoDecision):
		return status.Error(codes.NotFound, "target not found")
	case errors.Is(err, store.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, target.ErrStaleDecision):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, errOverloaded):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, store.ErrCorrupt):
		log.ErrorContext(ctx, "stored record cannot be decoded", "err", err)
		return status.Error(codes.DataLoss, "the target's stored record cannot be decoded")
	case errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, "server is shutting down")
	default:
		log.ErrorContext(ctx, "internal error", "err", err)
		return status.Error(codes.Internal, "internal error")
	}
}

// badRequest is InvalidArgument with a google.rpc.BadRequest detail listing
// the violations.
func badRequest(vs []setpointv1.FieldViolation) error {
	br := &errdetails.BadRequest{}
	msg := make([]string, 0, len(vs))
	for _, v := range vs {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		msg = append(msg, v.Field+": "+v.Description)
	}
	st := status.New(codes.InvalidArgument, "invalid request: "+strings.Join(msg, "; "))
	if withDetails, err := st.WithDetails(br); err == nil {
		st = withDetails
	}
	return st.Err()
}

// apiField turns an engine field path ("spec.minReplicas") into the
// request's spelling ("spec.min_replicas").
func apiField(f string) string {
	var b strings.Builder
	for _, r := range f {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
