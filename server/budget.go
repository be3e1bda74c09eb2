package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/store"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Defaults of the size budgets (Options.MaxStringBytes, MaxListEntries,
// MaxSpecBytes, MaxResponseBytes).
const (
	// DefaultMaxStringBytes bounds every string of a request: selectors,
	// label keys and values, quantities, messages. Kubernetes names are
	// further bounded to 253 bytes by validation.
	DefaultMaxStringBytes = 4 << 10
	// DefaultMaxListEntries bounds every list and map of a request that
	// no other limit bounds (match_labels, match_expressions, values,
	// containers, requests, policies).
	DefaultMaxListEntries = 256
	// DefaultMaxSpecBytes bounds the encoded spec of a Recommend: what a
	// target stores of a request (the spec, and its selectors again in
	// the status and the last decision).
	DefaultMaxSpecBytes = 64 << 10
	// DefaultMaxResponseBytes bounds a ListTargets page: below the 4 MiB
	// a gRPC client receives by default (Go, grpc-js, setpointctl).
	DefaultMaxResponseBytes = 3 << 20
)

// budgets bound the sizes of a request's strings, lists and maps and of
// the spec a target stores.
type budgets struct {
	maxString, maxEntries, maxSpec int
}

// boundedElsewhere are the lists with their own limits (requestLimits,
// simulateLimits): the generic bound on entries does not apply to them.
var boundedElsewhere = map[protoreflect.FullName]bool{
	"setpoint.v1.RecommendRequest.pods":               true,
	"setpoint.v1.SimulateStep.pods":                   true,
	"setpoint.v1.ResourceMetrics.items":               true,
	"setpoint.v1.MetricObservation.values":            true,
	"setpoint.v1.SimulateRequest.steps":               true,
	"setpoint.v1.RecommendRequest.observations":       true,
	"setpoint.v1.SimulateStep.observations":           true,
	"setpoint.v1.SimulateStep.metric_values":          true,
	"setpoint.v1.HorizontalPodAutoscalerSpec.metrics": true,
}

// check adds to e a violation for every string of m longer than
// maxString, every list or map (not bounded elsewhere) longer than
// maxEntries and, for a Recommend, a spec larger than maxSpec. The walk
// costs one pass over the decoded request; a field's path is spelled out
// only for a violation.
func (b budgets) check(e *setpointv1.ValidationError, m proto.Message) {
	b.walk(e, m.ProtoReflect(), nil)
	if r, ok := m.(*setpointv1.RecommendRequest); ok && r.GetSpec() != nil {
		if n := proto.Size(r.GetSpec()); n > b.maxSpec {
			e.Add("spec", "is %d bytes encoded: a target stores at most %d", n, b.maxSpec)
		}
	}
}

// fieldPath is where a value sits in a request: a field of its parent, an
// entry of a list (index) or of a map (key).
type fieldPath struct {
	parent *fieldPath
	field  protoreflect.Name
	index  int    // -1 when not a list entry
	key    string // set for a map entry
	isKey  bool
}

// String spells the path as the API does: "spec.metrics[0].name",
// `match_labels["app"]`.
func (p *fieldPath) String() string {
	if p == nil {
		return ""
	}
	s := p.parent.String()
	switch {
	case p.isKey:
		return s + "[" + strconv.Quote(p.key) + "]"
	case p.index >= 0:
		return s + "[" + strconv.Itoa(p.index) + "]"
	case s == "":
		return string(p.field)
	default:
		return s + "." + string(p.field)
	}
}

// walk checks the fields of m, at path.
func (b budgets) walk(e *setpointv1.ValidationError, m protoreflect.Message, path *fieldPath) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if len(e.Violations) >= 50 {
			return false
		}
		at := &fieldPath{parent: path, field: fd.Name(), index: -1}
		switch {
		case fd.IsMap():
			mp := v.Map()
			if mp.Len() > b.maxEntries {
				e.Add(at.String(), "has %d entries: at most %d", mp.Len(), b.maxEntries)
				return true
			}
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				key := k.String()
				if len(key) > b.maxString {
					e.Add(at.String(), "has a key of %d bytes: at most %d", len(key), b.maxString)
					return false
				}
				b.value(e, fd.MapValue(), mv, func() *fieldPath { return &fieldPath{parent: at, key: key, isKey: true, index: -1} })
				return true
			})
		case fd.IsList():
			l := v.List()
			if l.Len() > b.maxEntries && !boundedElsewhere[fd.FullName()] {
				e.Add(at.String(), "has %d entries: at most %d", l.Len(), b.maxEntries)
				return true
			}
			if typed := podChecks[fd.FullName()]; typed != nil {
				for i := range l.Len() {
					typed(b, e, l.Get(i).Message(), func() string { return (&fieldPath{parent: at, index: i}).String() })
				}
				return true
			}
			for i := range l.Len() {
				b.value(e, fd, l.Get(i), func() *fieldPath { return &fieldPath{parent: at, index: i} })
			}
		default:
			b.value(e, fd, v, func() *fieldPath { return at })
		}
		return true
	})
}

// value checks one value of field fd, at the path made by at.
func (b budgets) value(e *setpointv1.ValidationError, fd protoreflect.FieldDescriptor, v protoreflect.Value, at func() *fieldPath) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if n := len(v.String()); n > b.maxString {
			e.Add(at().String(), "is %d bytes: at most %d", n, b.maxString)
		}
	case protoreflect.BytesKind:
		if n := len(v.Bytes()); n > b.maxString {
			e.Add(at().String(), "is %d bytes: at most %d", n, b.maxString)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		b.walk(e, v.Message(), at())
	}
}

// listPage returns one ListTargets page of at most maxResponseBytes
// encoded (but at least one target): when the store's page is larger, the
// store is asked again for as many targets as fit, with their own next
// page token, so no target is skipped and no client's receive limit is
// exceeded. Records that cannot be decoded are logged and left out.
func (s *service) listPage(ctx context.Context, q store.Query) (*setpointv1.ListTargetsResponse, error) {
	for {
		recs, next, err := s.store.List(ctx, q)
		if errors.Is(err, store.ErrInvalid) && q.PageToken != "" {
			// The only invalid argument Validate cannot see: a page token
			// that is not one this query handed out.
			ve := &setpointv1.ValidationError{}
			ve.Add("page_token", "is not a token of this query's pages")
			err = ve
		}
		if err != nil && len(recs) == 0 {
			return nil, toStatus(ctx, s.log, err)
		} else if err != nil {
			s.log.WarnContext(ctx, "list: records left out", "err", err)
		}
		resp := &setpointv1.ListTargetsResponse{NextPageToken: next}
		total := 0
		for _, rec := range recs {
			t, err := convert.Target(rec)
			if err != nil {
				return nil, toStatus(ctx, s.log, err)
			}
			total += proto.Size(t) + 8 // with the field's tag and length
			if total > s.maxResponseBytes && len(resp.Targets) > 0 {
				break
			}
			resp.Targets = append(resp.Targets, t)
		}
		if len(resp.Targets) == len(recs) {
			return resp, nil
		}
		q.PageSize = len(resp.Targets)
	}
}

// positiveOr is v when positive, def otherwise.
func positiveOr[T int | int64 | float64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
