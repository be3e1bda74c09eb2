package store_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestContractImportsNoBackend: package store is the contract alone; a
// backend's engine (bbolt, etcd, the record codec, the journal) lives in
// its own package and imports store, never the other way round.
func TestContractImportsNoBackend(t *testing.T) {
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range p.Imports {
		if strings.HasPrefix(imp, "go.etcd.io/") || strings.HasPrefix(imp, "github.com/setpointhq/setpoint/store/") {
			t.Errorf("package store imports %s", imp)
		}
	}
}
