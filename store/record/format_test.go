package record_test

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
)

var updateFormat = flag.Bool("update-format", false, "rewrite FORMAT.md's field tables from the generated descriptors")

// formatTablesStart and formatTablesEnd enclose FORMAT.md's field tables.
const (
	formatTablesStart = "<!-- fields: generated from the descriptors, checked by TestFormatDoc -->\n"
	formatTablesEnd   = "<!-- end of fields -->\n"
)

// TestFormatDoc: the stored messages FORMAT.md documents, field by field
// (number, name, type), are exactly those of the generated descriptors of
// proto/setpoint/storage/v1/storage.proto, so the documented disk format
// cannot drift from the one the code writes. Run with -update-format
// after changing the .proto.
func TestFormatDoc(t *testing.T) {
	doc, err := os.ReadFile("FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start, end := strings.Index(text, formatTablesStart), strings.Index(text, formatTablesEnd)
	if start < 0 || end < start {
		t.Fatalf("FORMAT.md lacks the markers %q and %q", formatTablesStart, formatTablesEnd)
	}
	want := fieldTables(pb.File_setpoint_storage_v1_storage_proto)
	got := text[start+len(formatTablesStart) : end]
	if *updateFormat {
		text = text[:start+len(formatTablesStart)] + want + text[end:]
		if err := os.WriteFile("FORMAT.md", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FORMAT.md's field tables differ from the descriptors (-descriptors +FORMAT.md); run go test ./store/record -run TestFormatDoc -update-format:\n%s", diff)
	}
}

// fieldTables renders a Markdown table of the fields of each message of
// f, in the file's order, fields by number.
func fieldTables(f protoreflect.FileDescriptor) string {
	var b strings.Builder
	msgs := f.Messages()
	for i := range msgs.Len() {
		m := msgs.Get(i)
		fmt.Fprintf(&b, "\n### %s\n\n| number | field | type |\n|---:|---|---|\n", m.Name())
		fields := m.Fields()
		byNumber := make([]protoreflect.FieldDescriptor, 0, fields.Len())
		for j := range fields.Len() {
			byNumber = append(byNumber, fields.Get(j))
		}
		for j := 1; j < len(byNumber); j++ {
			for k := j; k > 0 && byNumber[k].Number() < byNumber[k-1].Number(); k-- {
				byNumber[k], byNumber[k-1] = byNumber[k-1], byNumber[k]
			}
		}
		for _, fd := range byNumber {
			fmt.Fprintf(&b, "| %d | %s | %s |\n", fd.Number(), fd.Name(), fieldType(fd))
		}
	}
	b.WriteString("\n")
	return b.String()
}

// fieldType is fd's type as the .proto spells it, with its label.
func fieldType(fd protoreflect.FieldDescriptor) string {
	var t string
	switch {
	case fd.IsMap():
		t = fmt.Sprintf("map<%s, %s>", kindName(fd.MapKey()), kindName(fd.MapValue()))
	default:
		t = kindName(fd)
	}
	switch {
	case fd.IsList():
		t = "repeated " + t
	case fd.HasOptionalKeyword():
		t = "optional " + t
	}
	if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
		t += fmt.Sprintf(" (oneof %s)", o.Name())
	}
	return t
}

func kindName(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if fd.Message().ParentFile() == fd.ParentFile() {
			return string(fd.Message().Name())
		}
		return string(fd.Message().FullName())
	case protoreflect.EnumKind:
		return string(fd.Enum().FullName())
	}
	return fd.Kind().String()
}

// TestDocsNameRealFields: every Message.field the store's docs name
// (store/doc.go, store/boltstore/doc.go, this package's doc, FORMAT.md), for a stored message, is
// a field of that message in the descriptors: renaming or removing a
// field fails here until the prose follows.
func TestDocsNameRealFields(t *testing.T) {
	msgs := pb.File_setpoint_storage_v1_storage_proto.Messages()
	ref := regexp.MustCompile(`\b([A-Z][A-Za-z]+)\.([a-z][a-z0-9_]*)\b`)
	seen := 0
	for _, path := range []string{"../doc.go", "../boltstore/doc.go", "../boltstore/schema/doc.go", "record.go", "FORMAT.md"} {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(src), -1) {
			md := msgs.ByName(protoreflect.Name(m[1]))
			if md == nil {
				continue // not a stored message (a Go package, a type)
			}
			seen++
			if md.Fields().ByName(protoreflect.Name(m[2])) == nil {
				t.Errorf("%s names %s.%s, which the descriptors do not have", path, m[1], m[2])
			}
		}
	}
	if seen == 0 {
		t.Error("the docs name no field of a stored message: the pattern no longer matches them")
	}
}
