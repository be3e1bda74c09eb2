package codec

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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
func decode(b []byte, g generated) error {
	m := g.(proto.Message)
	if err := check(b, m.ProtoReflect().Descriptor()); err != nil {
		return err
	}
	if g.UnmarshalVT(b) != nil {
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
// ended by another number or nested too deep. It reads b once, allocates
// nothing, and knows no field number: md says which fields are strings
// and messages. This is the one hand-written wire reader of the server:
// the reflective walk of the decoded message it replaced cost more than
// the decoding (docs/benchmarks.md, "Request decoding").
func check(b []byte, md protoreflect.MessageDescriptor) error {
	var w wireCheck
	switch err := w.message(b, md, 0); err {
	case nil:
		return nil
	case errWire:
		return &DecodeError{}
	}
	// Again, noting the path to the string this time.
	w = wireCheck{track: true}
	_ = w.message(b, md, 0)
	return &DecodeError{Field: w.path()}
}

var (
	// errWire is a message proto.Unmarshal refuses for its wire format.
	errWire = &DecodeError{}
	// errNotUTF8 is a string that is not UTF-8, its path not spelled yet.
	errNotUTF8 = errors.New("codec: a string is not UTF-8")
)

// wireCheck is check's walk.
type wireCheck struct {
	// track: note the path in steps, which then, after message returned
	// errNotUTF8, lead to the string.
	track bool
	steps []step
}

// step is one step of a path: a field, and its index in a list.
type step struct {
	field protoreflect.Name
	index int // -1: not a list
}

// message checks the message of md encoded in b, at depth nested
// messages.
func (w *wireCheck) message(b []byte, md protoreflect.MessageDescriptor, depth int) error {
	if depth > protowire.DefaultRecursionLimit {
		return errWire
	}
	fields := md.Fields()
	var seen map[protowire.Number]int // tracking: a list's entries so far
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber || typ == protowire.EndGroupType {
			return errWire
		}
		b = b[n:]
		fd := fields.ByNumber(num)
		if fd == nil || !wireTypeOf(fd, typ) {
			// Unknown, or known with another wire type: proto.Unmarshal
			// keeps it as an unknown field.
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errWire
			}
			b = b[n:]
			continue
		}
		if w.track {
			index := -1
			if fd.IsList() {
				if seen == nil {
					seen = map[protowire.Number]int{}
				}
				index = seen[num]
				seen[num]++
			}
			w.steps = append(w.steps, step{field: fd.Name(), index: index})
		}
		n, err := w.value(fd, typ, b, depth)
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

// value checks the value of the field fd, of the wire type typ, at the
// start of b, and returns its length.
func (w *wireCheck) value(fd protoreflect.FieldDescriptor, typ protowire.Type, b []byte, depth int) (int, error) {
	if typ != protowire.BytesType {
		if n := protowire.ConsumeFieldValue(fd.Number(), typ, b); n >= 0 {
			return n, nil
		}
		return 0, errWire
	}
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return 0, errWire
	}
	switch {
	case fd.Kind() == protoreflect.StringKind:
		if checksUTF8(fd) && !utf8.Valid(v) {
			return 0, errNotUTF8
		}
	case fd.IsMap():
		// A map's keys and values are named by the map field.
		inner := wireCheck{}
		if err := inner.message(v, fd.Message(), depth+1); err != nil {
			return 0, err
		}
	case fd.Message() != nil:
		if err := w.message(v, fd.Message(), depth+1); err != nil {
			return 0, err
		}
	case fd.IsList():
		if !packed(fd.Kind(), v) {
			return 0, errWire
		}
	}
	return n, nil
}

// wireTypeOf reports whether typ is the wire type of fd's values (or, for
// a list of numbers, of their packed form).
func wireTypeOf(fd protoreflect.FieldDescriptor, typ protowire.Type) bool {
	want := scalarWireType(fd.Kind())
	return typ == want || fd.IsList() && typ == protowire.BytesType && want != protowire.BytesType && want != protowire.StartGroupType
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

// packed reports whether v is a packed list of numbers of kind k.
func packed(k protoreflect.Kind, v []byte) bool {
	typ := scalarWireType(k)
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
