package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// renderNow is the clock of the rendering tests: 30 s after the fixtures'
// last decision.
var renderNow = time.Date(2026, 3, 1, 12, 2, 30, 0, time.UTC)

// TestFleetRendering renders the fleets of testdata/render (GetFleet's
// answer, as YAML) the way fleet explain and fleet get -o wide print them
// and compares the output with testdata/golden/render-NAME.txt; no server
// is involved. go test -run TestFleetRendering -update-golden rewrites the
// files.
func TestFleetRendering(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "render", "fleet-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			f := &setpointv1.Fleet{}
			if err := readMessage(nil, file, f); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			out.WriteString("$ setpointctl fleet explain " + "shop/web\n")
			out.WriteString(explainFleet(f, renderNow))
			e := &env{cli: &cli{stdout: &out, now: func() time.Time { return renderNow }}}
			out.WriteString("$ setpointctl fleet get shop/web -o wide\n")
			if err := printFleets(e, []*setpointv1.Fleet{f}, true); err != nil {
				t.Fatal(err)
			}
			out.WriteString("$ setpointctl fleet get shop/web\n")
			if err := printFleets(e, []*setpointv1.Fleet{f}, false); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "golden", "render-"+name+".txt"), out.String())
		})
	}
}

// TestFleetDocs: each output docs/setpointctl-fleets.md shows after a
// "<!-- golden: FILE -->" line is testdata/golden/FILE, so the doc says
// what setpointctl prints.
func TestFleetDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/setpointctl-fleets.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- golden: ([^ ]+) -->\n```\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("the doc shows no golden output")
	}
	for _, b := range blocks {
		want, err := os.ReadFile(filepath.Join("testdata", "golden", string(b[1])))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(b[2])); diff != "" {
			t.Errorf("docs/setpointctl-fleets.md shows %s differently (-golden +doc):\n%s", b[1], diff)
		}
	}
	for _, f := range []string{fleetExample, fleetSimulateExample, "testdata/fleet-invalid.yaml"} {
		if !strings.Contains(string(doc), f) {
			t.Errorf("the doc does not name %s", f)
		}
	}
}
