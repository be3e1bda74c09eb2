package codec

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// DecodeError says why a message did not decode.
type DecodeError struct {
	// Field is the path of a string that is not valid UTF-8, as the API
	// spells paths ("target.cluster", "pods[1].name"; a map field for its
	// keys and values: "pods[0].requests"); empty when the bytes are not
	// protobuf wire format a message decodes from (or nest deeper than
	// protobuf-go decodes).
	Field string
}

// Error implements error.
func (e *DecodeError) Error() string {
	if e.Field != "" {
		return e.Field + " is not valid UTF-8"
	}
	return "it is not valid protobuf wire format"
}

// decode decodes b into the empty message g with its generated decoder,
// after checking b for what that decoder does not check (check). A
// message it still refuses is decoded by proto.Unmarshal, which decides.
func decode(b []byte, g generated) error { return decodeKept(b, g, nil) }

// decodeKept is decode, with rm, when not nil, a cleared ResourceMetrics
// kept from an earlier Recommend (keptRequest) for g's resource_metrics
// when g is a Recommend and b has one: the generated decoder then fills
// rm, and its containers' maps, instead of messages and maps of its own.
// rm is set only for a field b has, so the message is the one decode
// makes.
func decodeKept(b []byte, g generated, rm *setpointv1.ResourceMetrics) error {
	m := g.(proto.Message)
	fields, err := check(b, m.ProtoReflect().Descriptor())
	if err != nil && err != errMapEntryWire {
		return err
	}
	if r, ok := g.(*setpointv1.RecommendRequest); ok && rm != nil && fields.has(recommendResourceMetrics) {
		r.ResourceMetrics = rm
	}
	if err == errMapEntryWire || g.UnmarshalVT(b) != nil {
		// proto.Unmarshal keeps a known field of another wire type as an
		// unknown one; the generated decoder refuses it.
		proto.Reset(m)
		if proto.Unmarshal(b, m) != nil {
			return &DecodeError{}
		}
	}
	return nil
}

// check returns a *DecodeError when b is not a message of md that
// proto.Unmarshal decodes, for any reason the generated decoder does not
// check: a string that is not UTF-8 (vtprotobuf does not check them,
// planetscale/vtprotobuf#146), and in what it skips or keeps as unknown
// fields, a field number out of range, a varint over 64 bits, a group
// ended by another number or nested too deep. It returns errMapEntryWire
// for a message that is otherwise fine but has a map entry whose key or
// value comes with another wire type: the generated decoder reads those
// without looking at their wire type, so proto.Unmarshal decodes such a
// message (it keeps them as unknown fields of the entry, which the map
// drops). It reads b once, allocates
// nothing, and knows no field number: md's shape says which fields are
// strings and messages. This is the one hand-written wire reader of the
// server: the reflective walk of the decoded message it replaced cost more
// than the decoding (docs/benchmarks.md, "Request decoding").
//
// It also returns which of the message's own fields numbered below 64 b
// has, of their own wire type (topFields).
func check(b []byte, md protoreflect.MessageDescriptor) (topFields, error) {
	s := shapeOf(md)
	var w wireCheck
	switch err := w.message(b, s, 0); err {
	case nil:
		if w.mapEntryWire {
			return w.top, errMapEntryWire
		}
		return w.top, nil
	case errWire:
		return 0, &DecodeError{}
	}
	// Again, noting the path to the string this time.
	w = wireCheck{track: true}
	_ = w.message(b, s, 0)
	return 0, &DecodeError{Field: w.path()}
}

// topFields are the fields numbered 1 to 63 of a message that its bytes
// have (check): bit n for field n.
type topFields uint64

// has reports whether field num is among f.
func (f topFields) has(num protowire.Number) bool { return num < 64 && f&(1<<num) != 0 }

// recommendResourceMetrics is the field number of a RecommendRequest's
// resource_metrics, read from its descriptor.
var recommendResourceMetrics = (&setpointv1.RecommendRequest{}).ProtoReflect().Descriptor().Fields().ByName("resource_metrics").Number()

var (
	// errWire is a message proto.Unmarshal refuses for its wire format.
	errWire = &DecodeError{}
	// errNotUTF8 is a string that is not UTF-8, its path not spelled yet.
	errNotUTF8 = errors.New("codec: a string is not UTF-8")
	// errMapEntryWire is a message to decode with proto.Unmarshal (check).
	errMapEntryWire = errors.New("codec: a map entry's key or value has another wire type")
)

// shape is what check needs of a message's fields, read once from its
// descriptor: a lookup by field number and a few flags instead of the
// descriptor's methods for every field of every request.
type shape struct {
	// dense are the fields by number, up to the highest number below
	// maxDense; nil: no such field.
	dense []*fieldShape
	// sparse are the fields numbered maxDense or above.
	sparse map[protowire.Number]*fieldShape
}

// maxDense bounds the field numbers a shape looks up in a slice.
const maxDense = 256

// fieldShape is one field of a shape.
type fieldShape struct {
	fd protoreflect.FieldDescriptor
	// wire is the wire type of one value; packable: a list of numbers,
	// which also comes packed (protowire.BytesType).
	wire     protowire.Type
	packable bool
	// bytes is what a length-delimited value of the field is checked for.
	bytes bytesCheck
	// msg is the shape of a message field's message (or a map's entry).
	msg *shape
}

// bytesCheck is what check reads in a length-delimited value.
type bytesCheck uint8

const (
	bytesNone    bytesCheck = iota // bytes, or a string not checked for UTF-8
	bytesUTF8                      // a string checked for UTF-8
	bytesMessage                   // a message
	bytesMap                       // a map entry: named by the map field
	bytesPacked                    // a packed list of numbers
)

// shapes are the shapes built so far, by message descriptor: one per
// message type the server decodes, so bounded by the protos.
var shapes sync.Map // protoreflect.MessageDescriptor → *shape

// shapeOf returns md's shape, building it (and those of the messages in
// it) the first time.
func shapeOf(md protoreflect.MessageDescriptor) *shape {
	if s, ok := shapes.Load(md); ok {
		return s.(*shape)
	}
	built := map[protoreflect.MessageDescriptor]*shape{}
	s := buildShape(md, built)
	for d, b := range built {
		shapes.LoadOrStore(d, b)
	}
	return s
}

// buildShape builds md's shape, recording it and those of the messages
// in it in built (a message may hold itself).
func buildShape(md protoreflect.MessageDescriptor, built map[protoreflect.MessageDescriptor]*shape) *shape {
	if s, ok := built[md]; ok {
		return s
	}
	if s, ok := shapes.Load(md); ok {
		return s.(*shape)
	}
	s := &shape{}
	built[md] = s
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		f := &fieldShape{fd: fd, wire: scalarWireType(fd.Kind())}
		f.packable = fd.IsList() && f.wire != protowire.BytesType && f.wire != protowire.StartGroupType
		switch {
		case fd.Kind() == protoreflect.StringKind:
			if checksUTF8(fd) {
				f.bytes = bytesUTF8
			}
		case fd.IsMap():
			f.bytes, f.msg = bytesMap, buildShape(fd.Message(), built)
		case fd.Message() != nil:
			f.bytes, f.msg = bytesMessage, buildShape(fd.Message(), built)
		case f.packable:
			f.bytes = bytesPacked
		}
		if num := fd.Number(); num < maxDense {
			if int(num) >= len(s.dense) {
				s.dense = append(s.dense, make([]*fieldShape, int(num)+1-len(s.dense))...)
			}
			s.dense[num] = f
		} else {
			if s.sparse == nil {
				s.sparse = map[protowire.Number]*fieldShape{}
			}
			s.sparse[num] = f
		}
	}
	return s
}

// field is the field numbered num, or nil.
func (s *shape) field(num protowire.Number) *fieldShape {
	if int(num) < len(s.dense) {
		return s.dense[num]
	}
	if s.sparse == nil {
		return nil
	}
	return s.sparse[num]
}

// wireCheck is check's walk.
type wireCheck struct {
	// track: note the path in steps, which then, after message returned
	// errNotUTF8, lead to the string.
	track bool
	steps []step
	// entry: the message walked is a map entry; mapEntryWire: a map
	// entry's key or value came with another wire type (check).
	entry        bool
	mapEntryWire bool
	// top: the fields of the outermost message seen (check).
	top topFields
}

// step is one step of a path: a field, and its index in a list.
type step struct {
	field protoreflect.Name
	index int // -1: not a list
}

// message checks the message of shape s encoded in b, at depth nested
// messages.
func (w *wireCheck) message(b []byte, s *shape, depth int) error {
	if depth > protowire.DefaultRecursionLimit {
		return errWire
	}
	var seen map[protowire.Number]int // tracking: a list's entries so far
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber || typ == protowire.EndGroupType {
			return errWire
		}
		b = b[n:]
		f := s.field(num)
		if f == nil || typ != f.wire && !(f.packable && typ == protowire.BytesType) {
			// Unknown, or known with another wire type: proto.Unmarshal
			// keeps it as an unknown field.
			if f != nil && w.entry {
				w.mapEntryWire = true
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errWire
			}
			b = b[n:]
			continue
		}
		if depth == 0 && num < 64 {
			w.top |= 1 << num
		}
		if w.track {
			index := -1
			if f.fd.IsList() {
				if seen == nil {
					seen = map[protowire.Number]int{}
				}
				index = seen[num]
				seen[num]++
			}
			w.steps = append(w.steps, step{field: f.fd.Name(), index: index})
		}
		n, err := w.value(f, num, typ, b, depth)
		if err != nil {
			return err
		}
		if w.track {
			w.steps = w.steps[:len(w.steps)-1]
		}
		b = b[n:]
	}
	return nil
}

// value checks the value of the field f, numbered num, of the wire type
// typ, at the start of b, and returns its length.
func (w *wireCheck) value(f *fieldShape, num protowire.Number, typ protowire.Type, b []byte, depth int) (int, error) {
	if typ != protowire.BytesType {
		if n := protowire.ConsumeFieldValue(num, typ, b); n >= 0 {
			return n, nil
		}
		return 0, errWire
	}
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return 0, errWire
	}
	switch f.bytes {
	case bytesUTF8:
		if !utf8.Valid(v) {
			return 0, errNotUTF8
		}
	case bytesMap:
		// A map's keys and values are named by the map field.
		inner := wireCheck{entry: true}
		if err := inner.message(v, f.msg, depth+1); err != nil {
			return 0, err
		}
		w.mapEntryWire = w.mapEntryWire || inner.mapEntryWire
	case bytesMessage:
		if err := w.message(v, f.msg, depth+1); err != nil {
			return 0, err
		}
	case bytesPacked:
		if !packed(f.wire, v) {
			return 0, errWire
		}
	}
	return n, nil
}

// scalarWireType is the wire type of one value of kind k.
func scalarWireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.BytesType
}

// packed reports whether v is a packed list of numbers of the wire type
// typ.
func packed(typ protowire.Type, v []byte) bool {
	for len(v) > 0 {
		n := protowire.ConsumeFieldValue(1, typ, v)
		if n < 0 {
			return false
		}
		v = v[n:]
	}
	return true
}

// checksUTF8 reports whether proto.Unmarshal checks the strings of fd.
func checksUTF8(fd protoreflect.FieldDescriptor) bool {
	if f, ok := fd.(interface{ EnforceUTF8() bool }); ok {
		return f.EnforceUTF8()
	}
	return fd.Syntax() == protoreflect.Proto3
}

// path spells w's path: "spec.metrics[0].name".
func (w *wireCheck) path() string {
	var sb strings.Builder
	for _, s := range w.steps {
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(string(s.field))
		if s.index >= 0 {
			sb.WriteString("[" + strconv.Itoa(s.index) + "]")
		}
	}
	return sb.String()
}
