package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/setpointhq/setpoint/engine"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/admission"
	"github.com/setpointhq/setpoint/server/simulate"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Errors of the service, mapped by toStatus.
var ()

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
		return admission.BadRequest(ve.Violations)
	case errors.As(err, &fe):
		field := apiField(fe.Field, recommendRequest)
		if field == "" {
			// Not the caller's field: the server's clock or the stored
			// status.
			log.ErrorContext(ctx, "engine refused an input the request did not set", "err", err)
			return status.Error(codes.Internal, "internal error")
		}
		return admission.BadRequest([]setpointv1.FieldViolation{{Field: field, Description: fe.Reason}})
	case errors.Is(err, store.ErrNotFound), errors.Is(err, target.ErrNoDecision):
		return status.Error(codes.NotFound, "target not found")
	case errors.Is(err, store.ErrInvalid):
		log.InfoContext(ctx, "invalid argument", "err", err)
		return status.Error(codes.InvalidArgument, "invalid request: the store cannot use it")
	case errors.Is(err, target.ErrStaleDecision):
		return status.Error(codes.FailedPrecondition, "the decision is not the target's last decision")
	case errors.Is(err, target.ErrUnknownDecision):
		return admission.BadRequest([]setpointv1.FieldViolation{{Field: "decision_id", Description: "is not a decision this target was given"}})
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, store.ErrCorrupt):
		log.ErrorContext(ctx, "stored record cannot be decoded", "err", err)
		return status.Error(codes.DataLoss, "the target's stored record cannot be decoded")
	case errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, "server is shutting down")
	case errors.Is(err, store.ErrUnavailable):
		log.WarnContext(ctx, "store unavailable", "err", err)
		return status.Error(codes.Unavailable, "the store is unavailable; try again (a write may or may not have been made)")
	default:
		log.ErrorContext(ctx, "internal error", "err", err)
		return status.Error(codes.Internal, "internal error")
	}
}

// recommendRequest is the message engine field paths are read against.
var recommendRequest = (&setpointv1.RecommendRequest{}).ProtoReflect().Descriptor()

// apiField turns an engine field path ("spec.minReplicas",
// "resourceMetrics.pods[2].containers[0].usage[cpu]") into the longest
// path of a field of msg that it names ("spec.min_replicas",
// "resource_metrics.items[2].containers[0].usage[\"cpu\"]"): the engine
// names some fields of its own input that the request spells otherwise or
// groups under the metric's source ("spec.metrics[0].target.utilization"
// becomes "spec.metrics[0]"). It returns "" for a path that names no field
// of msg (the engine's "now" or "status").
func apiField(f string, msg protoreflect.MessageDescriptor) string {
	var b strings.Builder
	for _, r := range f {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	path := strings.Replace(b.String(), "resource_metrics.pods[", "resource_metrics.items[", 1)
	// The engine writes a resource list's keys bare: requests[cpu].
	path = engineKey.ReplaceAllString(path, `.$1["$2"]`)
	return fieldPrefix(msg, path)
}

// engineKey is a resource list entry as the engine writes it.
var engineKey = regexp.MustCompile(`\.(requests|usage|overhead)\[([^\]"]*)\]`)

// fieldPrefix returns the longest prefix of path that names a field of msg
// (or one of its oneofs), "" when none. A path is dot-separated field names,
// each optionally followed by a list index ([3]) or a quoted map key
// (["cpu"]).
func fieldPrefix(msg protoreflect.MessageDescriptor, path string) string {
	valid := 0
	md := msg
	for i := 0; i < len(path) && md != nil; {
		j := i
		for j < len(path) && path[j] != '.' && path[j] != '[' {
			j++
		}
		name := protoreflect.Name(path[i:j])
		fd := md.Fields().ByName(name)
		if fd == nil {
			if od := md.Oneofs().ByName(name); od != nil && j == len(path) {
				valid = j
			}
			break
		}
		md = fd.Message()
		if j < len(path) && path[j] == '[' {
			end, ok := subscript(fd, path[j:])
			if !ok {
				valid = j
				break
			}
			j += end
			if fd.IsMap() {
				md = fd.MapValue().Message()
			}
		} else if fd.IsList() || fd.IsMap() {
			md = nil // a whole list or map: nothing below it
		}
		valid = j
		if j < len(path) && path[j] != '.' {
			break
		}
		i = j + 1
	}
	return path[:valid]
}

// subscript returns the length of the index ("[3]") or quoted map key
// (["cpu"]) at the start of s, and whether it fits field fd.
func subscript(fd protoreflect.FieldDescriptor, s string) (int, bool) {
	if strings.HasPrefix(s, `["`) {
		key, err := strconv.QuotedPrefix(s[1:])
		if err != nil || !fd.IsMap() || !strings.HasPrefix(s[1+len(key):], "]") {
			return 0, false
		}
		return len(key) + 2, true
	}
	end := strings.IndexByte(s, ']')
	if end < 2 || !fd.IsList() {
		return 0, false
	}
	if _, err := strconv.ParseUint(s[1:end], 10, 31); err != nil {
		return 0, false
	}
	return end + 1, true
}

// simulateError names the field of a simulation step's engine error
// (simulate.StepError) in the Simulate request: a field of the spec in
// force, of the settings, or of the step's inputs. Other errors are
// returned as they are.
func simulateError(err error) error {
	var se *simulate.StepError
	if !errors.As(err, &se) {
		return err
	}
	field := apiField(se.Err.Field, recommendRequest)
	switch {
	case field == "":
		return se.Err // not the caller's: Internal
	case field == "spec" || strings.HasPrefix(field, "spec."):
		field = se.SpecAt + strings.TrimPrefix(field, "spec")
	case field != "settings" && !strings.HasPrefix(field, "settings."):
		field = fmt.Sprintf("steps[%d].%s", se.Step, field)
	}
	verr := &setpointv1.ValidationError{}
	verr.Add(field, "%s", se.Err.Reason)
	return verr
}
