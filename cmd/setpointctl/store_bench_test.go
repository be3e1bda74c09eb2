package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	tgt "github.com/setpointhq/setpoint/target"
)

// benchTargets is how many targets each copy of BenchmarkStoreCopy moves.
const benchTargets = 500

// BenchmarkStoreCopy measures setpointctl store copy (copy and
// verification) of benchTargets realistic records — the time a move keeps
// the service stopped — from bbolt to bbolt (the baseline, in the same
// run), from bbolt into a 3-member etcd cluster on loopback, and back.
func BenchmarkStoreCopy(b *testing.B) {
	cluster := etcdtest.Start(b, 3)
	etcd := "etcd:" + strings.Join(cluster.Endpoints, ",")
	dir := b.TempDir()
	src := filepath.Join(dir, "src.db")
	seedCopies(b, src, benchTargets)
	// An etcd source: the same records under their own prefix.
	run(b, "store", "copy", "--from", "bolt:"+src, "--to", etcd, "--etcd-prefix", "/bench-src/")

	n := 0
	for _, bc := range []struct {
		name string
		args func() []string
	}{
		{"bolt-to-bolt", func() []string {
			return []string{"--from", "bolt:" + src, "--to", "bolt:" + filepath.Join(dir, fmt.Sprint(n, ".db"))}
		}},
		{"bolt-to-etcd", func() []string {
			return []string{"--from", "bolt:" + src, "--to", etcd, "--etcd-prefix", fmt.Sprintf("/bench-%d/", n)}
		}},
		{"etcd-to-bolt", func() []string {
			return []string{"--from", etcd, "--etcd-prefix", "/bench-src/", "--to", "bolt:" + filepath.Join(dir, fmt.Sprint(n, ".db"))}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				n++
				run(b, append([]string{"store", "copy"}, bc.args()...)...)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*benchTargets), "µs/target")
		})
	}
}

// run runs a setpointctl command line and fails b unless it succeeds.
func run(b *testing.B, args ...string) {
	b.Helper()
	c := &cli{stdout: io.Discard, stderr: io.Discard, now: time.Now}
	if err := c.run(b.Context(), args); err != nil {
		b.Fatalf("setpointctl %v: %v", args, err)
	}
}

// seedCopies writes n targets to a new bbolt file at path, each a copy of
// a record a real server made (three decisions and an applied rescale).
func seedCopies(b *testing.B, path string, n int) {
	b.Helper()
	one := filepath.Join(b.TempDir(), "one.db")
	populate(b, one, "web")
	st, err := boltstore.Open(one, boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	recs, _, err := st.List(b.Context(), store.Query{})
	st.Close()
	if err != nil || len(recs) != 1 {
		b.Fatalf("seed record: %d, %v", len(recs), err)
	}
	dst, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	for i := range n {
		rec := recs[0]
		rec.Key.Name = fmt.Sprintf("web-%04d", i)
		if _, err := dst.Update(b.Context(), rec.Key, func(r *tgt.Record) error { *r = rec; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
