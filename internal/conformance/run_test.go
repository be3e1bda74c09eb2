package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpointhq/setpoint/internal/conformance"
)

const corpus = "../../testdata/conformance/scenarios"

// own is Setpoint's own scenarios in the corpus' format, beyond the public
// corpus (which testdata/conformance copies unchanged).
const own = "../../testdata/scenarios"

// run replays paths through a fresh server and returns the result and the
// report.
func run(t *testing.T, paths ...string) (conformance.Result, string) {
	t.Helper()
	h, err := conformance.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Stop(); err != nil {
			t.Error(err)
		}
	}()
	var out bytes.Buffer
	res, err := conformance.Run(context.Background(), h.Client, h.Clock, &out, paths...)
	if err != nil {
		t.Fatal(err)
	}
	return res, out.String()
}

// TestCorpus replays the whole public corpus and Setpoint's own
// scenarios over gRPC.
func TestCorpus(t *testing.T) {
	res, out := run(t, corpus, own)
	if res.Failed != 0 || res.Passed == 0 {
		t.Fatalf("got %+v:\n%s", res, out)
	}
	if !strings.HasSuffix(out, "conformance: "+itoa(res.Passed)+" passed, 0 failed\n") {
		t.Errorf("summary line missing:\n%s", out)
	}
}

// TestCorruptedExpectationFails proves the runner fails: one scenario's
// expected desired replicas at step 1 is altered, and the report must name
// that scenario, step and field.
func TestCorruptedExpectationFails(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(corpus, "behavior-steps.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file map[string][]map[string]any
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	sc := file["scenarios"][0]
	steps := sc["steps"].([]any)
	if len(steps) < 2 {
		t.Fatal("first scenario needs 2 steps")
	}
	expect := steps[1].(map[string]any)["expect"].(map[string]any)
	expect["desiredReplicas"] = expect["desiredReplicas"].(float64) + 1000
	file["scenarios"] = file["scenarios"][:3]
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "corrupted.json"), file)
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"scenarios": [`), 0o644); err != nil {
		t.Fatal(err)
	}

	res, out := run(t, dir)
	if res.Passed != 2 || res.Failed != 2 {
		t.Errorf("got %+v, want 2 passed, 2 failed (one corrupted scenario, one unparsable file):\n%s", res, out)
	}
	want := "FAIL " + sc["name"].(string)
	if !strings.Contains(out, want) || !strings.Contains(out, "step 1: desiredReplicas") {
		t.Errorf("report does not name the scenario, step and field:\n%s", out)
	}
	if !strings.Contains(out, "broken.json: cannot parse") {
		t.Errorf("report does not name the unparsable file:\n%s", out)
	}
	if !strings.HasSuffix(out, "conformance: 2 passed, 2 failed\n") {
		t.Errorf("bad summary:\n%s", out)
	}
}

// TestIgnoredSpecEditFails proves the runner follows per-step spec edits:
// the spec-edits family passes as recorded, and the same scenarios with
// every step's spec removed (a runner that ignores the edits) fail.
func TestIgnoredSpecEditFails(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(corpus, "spec-edits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file map[string][]map[string]any
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	edits := 0
	for _, sc := range file["scenarios"] {
		for _, st := range sc["steps"].([]any) {
			step := st.(map[string]any)
			if _, ok := step["spec"]; ok {
				delete(step, "spec")
				edits++
			}
		}
	}
	if edits == 0 {
		t.Fatal("spec-edits.json has no step with a spec")
	}
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "ignored.json"), file)

	res, out := run(t, filepath.Join(corpus, "spec-edits.json"))
	if res.Failed != 0 || res.Passed != len(file["scenarios"]) {
		t.Fatalf("with the edits: got %+v, want all %d passed:\n%s", res, len(file["scenarios"]), out)
	}
	res, out = run(t, dir)
	if res.Failed == 0 || res.Passed+res.Failed != len(file["scenarios"]) {
		t.Fatalf("without the edits: got %+v, want failures among %d scenarios:\n%s", res, len(file["scenarios"]), out)
	}
	t.Logf("without their %d spec edits, %d of %d scenarios fail", edits, res.Failed, len(file["scenarios"]))
	if !strings.Contains(out, "FAIL spec-edits/") {
		t.Errorf("report does not name the failing scenarios:\n%s", out)
	}
}

// TestNoScenarios: an empty directory finds nothing, which the command
// treats as a failure.
func TestNoScenarios(t *testing.T) {
	res, out := run(t, t.TempDir())
	if res.Passed != 0 || res.Failed != 0 || !strings.HasSuffix(out, "conformance: 0 passed, 0 failed\n") {
		t.Errorf("got %+v:\n%s", res, out)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestCorpusCopyIsUnchanged: testdata/conformance is the shared corpus as
// it is, FORMAT.md included, so that bringing it up to date is a copy and
// Setpoint's own scenarios stay in testdata/scenarios. It compares the two
// where the shared corpus sits beside the checkout (../shared/conformance).
func TestCorpusCopyIsUnchanged(t *testing.T) {
	const shared, copied = "../../../shared/conformance", "../../testdata/conformance"
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("no shared corpus beside the checkout (%v)", err)
	}
	files := func(root string) map[string][]byte {
		got := map[string][]byte{}
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			rel, _ := filepath.Rel(root, path)
			got[rel] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, got := files(shared), files(copied)
	for name, b := range want {
		if c, ok := got[name]; !ok {
			t.Errorf("%s: in the shared corpus, not in testdata/conformance", name)
		} else if !bytes.Equal(b, c) {
			t.Errorf("%s: differs from the shared corpus", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: only in testdata/conformance (Setpoint's own scenarios go in testdata/scenarios)", name)
		}
	}
}
