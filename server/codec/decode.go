package codec

import (
	"unicode/utf8"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protov2 "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Codec returns the server's protobuf codec: grpc-go's own, except that it
// decodes the per-pod parts of a RecommendRequest — pods, pod metrics,
// metric observations — by hand. protobuf-go decodes their maps (a
// container's requests and usage) by reflection, with three allocations an
// entry; at 10 pods that was about half of a Recommend's decoding and a
// quarter of the bytes a durable Recommend allocates. By hand, the common
// strings (resource names, phases, statuses) are not allocated, and the
// entries of each list are allocated at once (BenchmarkDecodeRecommend:
// about half the time, 823 → 337 allocations). The result is the
// message proto.Unmarshal makes (FuzzDecodeRecommend): whatever the hand
// decoder does not decode the same way — an unknown field, an unexpected
// wire type, invalid UTF-8 — it leaves to proto.Unmarshal, which decodes
// the whole request again. A server is served with it (wrapped by
// Request); so is setpoint-bench's baseline, which pays the same
// decoding.
func Codec() encoding.CodecV2 { return fastCodec{encoding.GetCodecV2(proto.Name)} }

// fastCodec is Codec.
type fastCodec struct{ encoding.CodecV2 }

// Unmarshal decodes data into v.
func (c fastCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*setpointv1.RecommendRequest); ok && c.recommend(data, r, fresh) {
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// recommend decodes data into the empty r by hand, its per-pod parts into
// m, and reports whether it could; when it could not, r is left reset (and
// proto.Unmarshal is to decode it).
func (c fastCodec) recommend(data mem.BufferSlice, r *setpointv1.RecommendRequest, m *decodeMemory) bool {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	decoded := decodeRecommend(buf.ReadOnlyData(), r, m)
	buf.Free()
	if !decoded {
		protov2.Reset(r)
	}
	return decoded
}

// decodeRecommend decodes b into the empty r as proto.Unmarshal would, the
// per-pod parts into m, and reports whether it could; when it could not, r
// must be reset. The target, spec, settings and scale are left to
// proto.Unmarshal (merged, as a repeated occurrence of a message field
// is).
func decodeRecommend(b []byte, r *setpointv1.RecommendRequest, m *decodeMemory) bool {
	pods := slab(m, &m.pods, b, 5)
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		if typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			return merge(v, &r.Target)
		case 2:
			return merge(v, &r.Spec)
		case 3:
			return merge(v, &r.Settings)
		case 4:
			return merge(v, &r.Scale)
		case 5:
			return entry(typ, v, &r.Pods, pods, 0, m, &m.podLists, decodePod)
		case 6:
			if r.ResourceMetrics == nil {
				r.ResourceMetrics = &setpointv1.ResourceMetrics{}
			}
			return decodeResourceMetrics(v, r.ResourceMetrics, m)
		case 7:
			return entry(typ, v, &r.Observations, nil, 0, m, nil, decodeObservation)
		}
		return false
	})
}

// slab returns the messages for every field num of the message encoded in
// b, taken at once from m's arena a: one allocation (or none) for all the
// entries of a list.
func slab[T any](m *decodeMemory, a *arena[T], b []byte, num protowire.Number) []T {
	n := 0
	for len(b) > 0 {
		got, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			break
		}
		b = b[l:]
		if l = protowire.ConsumeFieldValue(got, typ, b); l < 0 {
			break
		}
		b = b[l:]
		if got == num {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return take(m, a, n)
}

// entry decodes v, the next entry of a list field, with decode into a
// message appended to *list: the next one of the list's slab s (made for
// the entries from the list's first on), or a new one past its end. The
// list's array is taken from m's arena lists (nil: made).
func entry[T any](typ protowire.Type, v []byte, list *[]*T, s []T, first int, m *decodeMemory, lists *arena[*T], decode func([]byte, *T, *decodeMemory) bool) bool {
	if typ != protowire.BytesType {
		return false
	}
	if *list == nil && len(s) > 0 {
		if lists != nil {
			*list = take(m, lists, len(s))[:0]
		} else {
			*list = make([]*T, 0, len(s))
		}
	}
	var e *T
	if i := len(*list) - first; i < len(s) {
		e = &s[i]
	} else {
		e = new(T)
	}
	*list = append(*list, e)
	return decode(v, e, m)
}

// fields calls f with each field of the message encoded in b: its number,
// wire type, and bytes (length-delimited) or value (varint). It reports
// false when b does not decode, has another wire type, or f returns false.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			return false
		}
		if n < 0 || !f(num, typ, v, x) {
			return false
		}
		b = b[n:]
	}
	return true
}

// merge decodes b into *m with proto.Unmarshal, merging into a message
// already there.
func merge[T any, PT interface {
	*T
	protov2.Message
}](b []byte, m *PT) bool {
	if *m == nil {
		*m = PT(new(T))
	}
	return protov2.UnmarshalOptions{Merge: true}.Unmarshal(b, *m) == nil
}

// str decodes a string field.
func str(typ protowire.Type, v []byte, s *string) bool {
	if typ != protowire.BytesType || !utf8.Valid(v) {
		return false
	}
	*s = intern(v)
	return true
}

// common are the strings most pods repeat: resource names, phases,
// condition statuses.
var common = []string{"cpu", "memory", "ephemeral-storage", "Running", "Pending", "Succeeded", "Failed", "Unknown", "True", "False"}

// intern returns v as a string, without allocating for the common ones.
func intern(v []byte) string {
	if len(v) <= len("ephemeral-storage") {
		for _, c := range common {
			if string(v) == c {
				return c
			}
		}
	}
	return string(v)
}

// boolean decodes a bool field.
func boolean(typ protowire.Type, x uint64, b *bool) bool {
	*b = x != 0
	return typ == protowire.VarintType
}

// mapEntry decodes an entry of a map<string, string> field into *m, a map
// taken from mem when there is none yet.
func mapEntry(typ protowire.Type, v []byte, m *map[string]string, mem *decodeMemory) bool {
	if typ != protowire.BytesType {
		return false
	}
	var key, value string
	ok := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		switch num {
		case 1:
			return str(typ, v, &key)
		case 2:
			return str(typ, v, &value)
		}
		return false
	})
	if !ok {
		return false
	}
	if *m == nil {
		*m = mem.newMap()
	}
	(*m)[key] = value
	return true
}

// message decodes a singular message field into *p with decode, merging
// into a message already there; a new message is taken from m's arena a.
func message[T any](typ protowire.Type, v []byte, p **T, m *decodeMemory, a *arena[T], decode func([]byte, *T, *decodeMemory) bool) bool {
	if typ != protowire.BytesType {
		return false
	}
	if *p == nil {
		*p = &take(m, a, 1)[0]
	}
	return decode(v, *p, m)
}

func decodePod(b []byte, p *setpointv1.Pod, m *decodeMemory) bool {
	containers := slab(m, &m.containers, b, 6)
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) bool {
		switch num {
		case 1:
			return str(typ, v, &p.Name)
		case 2:
			return str(typ, v, &p.Phase)
		case 3:
			return boolean(typ, x, &p.Deleting)
		case 4:
			return message(typ, v, &p.StartTime, m, &m.timestamps, decodeTimestamp)
		case 5:
			return message(typ, v, &p.Ready, m, &m.readies, decodeReady)
		case 6:
			return entry(typ, v, &p.Containers, containers, 0, m, &m.containerLists, decodeContainer)
		case 7:
			return mapEntry(typ, v, &p.Requests, m)
		case 8:
			return mapEntry(typ, v, &p.Overhead, m)
		}
		return false
	})
}

func decodeReady(b []byte, r *setpointv1.PodReadyCondition, m *decodeMemory) bool {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		switch num {
		case 1:
			return str(typ, v, &r.Status)
		case 2:
			return message(typ, v, &r.LastTransitionTime, m, &m.timestamps, decodeTimestamp)
		}
		return false
	})
}

func decodeContainer(b []byte, c *setpointv1.Container, m *decodeMemory) bool {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) bool {
		switch num {
		case 1:
			return str(typ, v, &c.Name)
		case 2:
			return mapEntry(typ, v, &c.Requests, m)
		case 3:
			return boolean(typ, x, &c.RestartableInit)
		case 4:
			return boolean(typ, x, &c.Init)
		}
		return false
	})
}

func decodeResourceMetrics(b []byte, rm *setpointv1.ResourceMetrics, m *decodeMemory) bool {
	items := slab(m, &m.podMetrics, b, 2)
	first := len(rm.Items) // a second resource_metrics appends to the first's
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		switch num {
		case 1:
			return str(typ, v, &rm.Error)
		case 2:
			return entry(typ, v, &rm.Items, items, first, m, &m.podMetricsLists, decodePodMetrics)
		}
		return false
	})
}

func decodePodMetrics(b []byte, p *setpointv1.PodMetrics, m *decodeMemory) bool {
	containers := slab(m, &m.containerMetrics, b, 4)
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		switch num {
		case 1:
			return str(typ, v, &p.Pod)
		case 2:
			return message(typ, v, &p.Timestamp, m, &m.timestamps, decodeTimestamp)
		case 3:
			return message(typ, v, &p.Window, m, &m.durations, decodeDuration)
		case 4:
			return entry(typ, v, &p.Containers, containers, 0, m, &m.containerMetricsLists, decodeContainerMetrics)
		}
		return false
	})
}

func decodeContainerMetrics(b []byte, c *setpointv1.ContainerMetrics, m *decodeMemory) bool {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		switch num {
		case 1:
			return str(typ, v, &c.Name)
		case 2:
			return mapEntry(typ, v, &c.Usage, m)
		}
		return false
	})
}

func decodeObservation(b []byte, o *setpointv1.MetricObservation, m *decodeMemory) bool {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		switch num {
		case 1:
			return str(typ, v, &o.Error)
		case 2:
			return entry(typ, v, &o.Values, nil, 0, m, nil, decodeMetricValue)
		}
		return false
	})
}

func decodeMetricValue(b []byte, mv *setpointv1.MetricValue, m *decodeMemory) bool {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) bool {
		switch num {
		case 1:
			return str(typ, v, &mv.Pod)
		case 2:
			return str(typ, v, &mv.Value)
		case 3:
			return message(typ, v, &mv.Timestamp, m, &m.timestamps, decodeTimestamp)
		case 4:
			return message(typ, v, &mv.Window, m, &m.durations, decodeDuration)
		}
		return false
	})
}

func decodeTimestamp(b []byte, t *timestamppb.Timestamp, _ *decodeMemory) bool {
	return secondsNanos(b, &t.Seconds, &t.Nanos)
}

func decodeDuration(b []byte, d *durationpb.Duration, _ *decodeMemory) bool {
	return secondsNanos(b, &d.Seconds, &d.Nanos)
}

// secondsNanos decodes a google.protobuf.Timestamp or Duration.
func secondsNanos(b []byte, seconds *int64, nanos *int32) bool {
	return fields(b, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) bool {
		if typ != protowire.VarintType {
			return false
		}
		switch num {
		case 1:
			*seconds = int64(x)
			return true
		case 2:
			*nanos = int32(x)
			return true
		}
		return false
	})
}
