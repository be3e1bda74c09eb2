package schema

import (
	"fmt"
	"os"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestLayoutDoc: the layout doc.go describes ("On-disk layout") names the
// schema version, every bucket and every meta key that package schema defines,
// and nothing else.
func TestLayoutDoc(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	start := strings.Index(doc, "// # On-disk layout")
	if start < 0 {
		t.Fatal(`doc.go has no "On-disk layout" section`)
	}
	section := doc[start:]
	if end := strings.Index(section, "\n// A record key is"); end > 0 {
		section = section[:end]
	}
	if want := fmt.Sprintf("(schema version %d)", Version); !strings.Contains(section, want) {
		t.Errorf("the layout's heading does not say %s", want)
	}
	var buckets, metaKeys []string
	inMeta := false
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "//\t    "): // a key of the bucket above
			if !inMeta {
				continue
			}
			rest := strings.TrimPrefix(line, "//\t    ")
			if k, _, ok := strings.Cut(rest, " → "); ok && strings.HasPrefix(k, `"`) {
				metaKeys = append(metaKeys, strings.Trim(k, `"`))
			} else {
				t.Errorf("a meta line without a quoted key: %q", rest)
			}
		case strings.HasPrefix(line, "//\t"): // a bucket
			name := strings.TrimPrefix(line, "//\t")
			buckets = append(buckets, name)
			inMeta = name == string(Meta)
		}
	}
	names := func(bs [][]byte) []string {
		var s []string
		for _, b := range bs {
			s = append(s, string(b))
		}
		return s
	}
	if diff := gocmp.Diff(names(Buckets), buckets); diff != "" {
		t.Errorf("buckets: package schema (-) against doc.go (+):\n%s", diff)
	}
	if diff := gocmp.Diff(names(MetaKeys), metaKeys); diff != "" {
		t.Errorf("meta keys: package schema (-) against doc.go (+):\n%s", diff)
	}
	if want := fmt.Sprintf(`"schema_version" → uint64, 8 bytes big-endian (%d)`, Version); !strings.Contains(section, want) {
		t.Errorf("the layout does not show the stored version as %s", want)
	}
}
