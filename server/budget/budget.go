// Package budget bounds what one request may hold — every string, every
// list and map no other limit bounds, and the spec a target stores — and
// names each violation by its field path, so a request over a budget is
// refused InvalidArgument before anything else reads it. It is part of the
// server's admission: the interceptor chain checks every request with it.
package budget

import (
	"strconv"
	"strings"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Defaults of the budgets (the server's Options.MaxStringBytes,
// MaxListEntries, MaxSpecBytes).
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
)

// Budgets bound the sizes of a request's strings, lists and maps and of
// the spec a target stores. The zero value of a field bounds nothing of
// its kind to zero: give every one.
type Budgets struct {
	// MaxString bounds every string, in bytes.
	MaxString int
	// MaxEntries bounds every list and map no other limit bounds.
	MaxEntries int
	// MaxSpec bounds the encoded spec a target stores, in bytes.
	MaxSpec int
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
	"setpoint.v1.FleetReport.pods":                    true,
	"setpoint.v1.FleetReport.observations":            true,
	"setpoint.v1.SimulateFleetRequest.steps":          true,
}

// Check adds to e a violation for every string of m longer than
// maxString, every list or map (not bounded elsewhere) longer than
// maxEntries and, for a Recommend, a spec larger than maxSpec. The walk
// costs one pass over the decoded request and allocates nothing while it
// finds no violation: the path to the current field is a stack, spelled
// out only for a violation. Recommend and Observe are walked with their
// generated getters (requests.go), every other request by
// reflection.
func (b Budgets) Check(e *setpointv1.ValidationError, m proto.Message) {
	b.CheckReceived(e, m, 0)
}

// CheckReceived is Check for a request received as received bytes (0:
// unknown), which spares measuring the spec of a request too small to hold
// a spec over maxSpec (specFits), and reading the maps' strings of a
// request too small to hold a string over maxString (a string decodes
// from as many bytes).
func (b Budgets) CheckReceived(e *setpointv1.ValidationError, m proto.Message, received int64) {
	// On the stack: the typed walks take no closure. A request received in
	// at most maxString bytes has no string longer: its maps need not be
	// iterated.
	w := walker{Budgets: b, e: e, stringsFit: received > 0 && received <= int64(b.MaxString)}
	if !w.typedCheck(m) {
		b.walk(e, m)
	}
	if !b.SpecFits(received) {
		b.checkSpec(e, m)
	}
}

// MaxSpecGrowth bounds how many times its encoded size as received a
// request's spec is once decoded and encoded again (proto.Size). Encoding
// again only drops what decoding dropped (default values, repeated
// fields, non-minimal varints) except for map entries, which are encoded
// with their key and value even when they came without: an entry of 2
// bytes (tag and length 0) becomes 6, so a part of the request grows at
// most 3 times, its length prefixes with it (by at most one byte each, and
// each came with at least two bytes of tag and length). The spec has no
// packable repeated field (a packed one would grow if it came unpacked...
// the other way round: it would grow if it came packed and were encoded
// unpacked). TestSpecGrowthBound checks the worst case.
const MaxSpecGrowth = 4

// SpecFits reports whether a request of received bytes (0: unknown) cannot
// hold a spec over maxSpec when encoded again.
func (b Budgets) SpecFits(received int64) bool {
	return received > 0 && received <= int64(b.MaxSpec)/MaxSpecGrowth
}

// checkReflective is check with the reflective walk for every request:
// the reference the typed walks are tested against.
func (b Budgets) checkReflective(e *setpointv1.ValidationError, m proto.Message) {
	b.walk(e, m)
	b.checkSpec(e, m)
}

// walk adds to e the violations of m's strings, lists and maps, found by
// reflection.
func (b Budgets) walk(e *setpointv1.ValidationError, m proto.Message) {
	w := walker{Budgets: b, e: e}
	w.walk(m.ProtoReflect())
}

// checkSpec adds to e a violation for the spec of a Recommend larger than
// maxSpec.
func (b Budgets) checkSpec(e *setpointv1.ValidationError, m proto.Message) {
	if r, ok := m.(*setpointv1.RecommendRequest); ok && r.GetSpec() != nil {
		if n := proto.Size(r.GetSpec()); n > b.MaxSpec {
			e.Add("spec", "is %d bytes encoded: a target stores at most %d", n, b.MaxSpec)
		}
	}
	if r, ok := m.(*setpointv1.PutFleetRequest); ok && r.GetSpec() != nil {
		if n := proto.Size(r.GetSpec()); n > b.MaxSpec {
			e.Add("spec", "is %d bytes encoded: a fleet stores at most %d", n, b.MaxSpec)
		}
	}
}

// step is one step of a field path: a field of its parent, an entry of a
// list (index) or of a map (key).
type step struct {
	field protoreflect.Name
	index int    // -1 when not a list entry
	key   string // set for a map entry
	isKey bool
}

// walker is one check's walk: the violations found, and the path from the
// request to the value being checked.
type walker struct {
	Budgets
	e *setpointv1.ValidationError
	// path holds the steps to the value being checked, depth of them:
	// a request nests less than maxDepth steps deep
	// (TestRequestsNestLessThanMaxDepth).
	path  [maxDepth]step
	depth int
	// stringsFit: the request holds no string longer than maxString (it
	// was received in fewer bytes), so the typed walks' maps are only
	// counted, not iterated.
	stringsFit bool
}

// maxDepth bounds the steps of a path: fields, list entries, map entries.
const maxDepth = 24

// at spells the current path, then suffix, as the API does:
// "spec.metrics[0].name", `match_labels["app"]`.
func (w *walker) at(suffix string) string {
	var sb strings.Builder
	for _, p := range w.path[:min(w.depth, maxDepth)] {
		switch {
		case p.isKey:
			sb.WriteString("[" + strconv.Quote(p.key) + "]")
		case p.index >= 0:
			sb.WriteString("[" + strconv.Itoa(p.index) + "]")
		default:
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(string(p.field))
		}
	}
	sb.WriteString(suffix)
	return sb.String()
}

func (w *walker) push(s step) {
	if w.depth < maxDepth {
		w.path[w.depth] = s
	}
	w.depth++
}

func (w *walker) pop() { w.depth-- }

// walk checks the fields of m, at the current path.
func (w *walker) walk(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if len(w.e.Violations) >= 50 {
			return false
		}
		w.push(step{field: fd.Name(), index: -1})
		defer w.pop()
		switch {
		case fd.IsMap():
			mp := v.Map()
			if mp.Len() > w.MaxEntries {
				w.e.Add(w.at(""), "has %d entries: at most %d", mp.Len(), w.MaxEntries)
				return true
			}
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				key := k.String()
				if len(key) > w.MaxString {
					w.e.Add(w.at(""), "has a key of %d bytes: at most %d", len(key), w.MaxString)
					return false
				}
				w.push(step{key: key, isKey: true, index: -1})
				w.value(fd.MapValue(), mv)
				w.pop()
				return true
			})
		case fd.IsList():
			l := v.List()
			if l.Len() > w.MaxEntries && !boundedElsewhere[fd.FullName()] {
				w.e.Add(w.at(""), "has %d entries: at most %d", l.Len(), w.MaxEntries)
				return true
			}
			typed := podChecks[fd.FullName()]
			for i := range l.Len() {
				w.push(step{index: i})
				if typed != nil {
					typed(w, l.Get(i).Message())
				} else {
					w.value(fd, l.Get(i))
				}
				w.pop()
			}
		default:
			w.value(fd, v)
		}
		return true
	})
}

// value checks one value of field fd, at the current path.
func (w *walker) value(fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if n := len(v.String()); n > w.MaxString {
			w.e.Add(w.at(""), "is %d bytes: at most %d", n, w.MaxString)
		}
	case protoreflect.BytesKind:
		if n := len(v.Bytes()); n > w.MaxString {
			w.e.Add(w.at(""), "is %d bytes: at most %d", n, w.MaxString)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		w.walk(v.Message())
	}
}
