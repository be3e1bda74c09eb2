package etcdstore_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/setpointhq/setpoint/internal/conformance"
)

// The conformance corpus passes with the server on the 3-member etcd
// cluster.
func TestConformanceCorpusOnEtcd(t *testing.T) {
	st := open(t, "")
	h, err := conformance.StartOn(t.TempDir(), st)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Stop(); err != nil {
			t.Error(err)
		}
	}()
	var out bytes.Buffer
	res, err := conformance.Run(context.Background(), h.Client, h.Clock, &out, "../../testdata/conformance/scenarios", "../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Passed == 0 || !strings.Contains(out.String(), "0 failed") {
		t.Fatalf("got %+v:\n%s", res, out.String())
	}
	t.Logf("%+v", res)
}
