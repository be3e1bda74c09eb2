package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/etcdstore"
	tgt "github.com/setpointhq/setpoint/target"
)

// populate serves the bbolt file path with a real server whose clock
// steps 15 s per decision, decides each of names three times, reports the
// first rescale of each as applied (a scale event in its history), and
// stops the server.
func populate(t testing.TB, path string, names ...string) {
	t.Helper()
	var mu sync.Mutex
	now := exampleNow
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(15 * time.Second)
		return now
	}
	srv := servertest.Start(t, servertest.Config{Path: path, Options: server.Options{Now: clock}})
	c, err := setpointclient.Dial(srv.Addr, setpointclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for round := range 3 {
		for _, name := range names {
			req := readExample(t)
			req.Target.Name = name
			d, err := c.Decide(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if round == 0 && d.GetRescale() {
				if _, err := c.Applied(t.Context(), req.Target, d.GetDecisionId(), 2, d.GetDesiredReplicas()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	c.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
}

// runStore runs a setpointctl command line and returns its output and
// exit code.
func runStore(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, now: time.Now}
	code = c.execute(t.Context(), args)
	return out.String(), errb.String(), code
}

// records opens the bbolt file at path and returns every record.
func records(t *testing.T, path string) []tgt.Record {
	t.Helper()
	b, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	recs, next, err := b.List(t.Context(), store.Query{PageSize: store.MaxPageSize})
	if err != nil || next != "" {
		t.Fatalf("List: %v (next %q)", err, next)
	}
	return recs
}

// A bbolt file moves into a 3-member etcd cluster and back into a new
// bbolt file; every target comes back with the same record, histories
// included. The command refuses to overwrite what it would copy into.
func TestStoreCopyRoundTrip(t *testing.T) {
	cluster := etcdtest.Start(t, 3)
	etcd := "etcd:" + strings.Join(cluster.Endpoints, ",")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	names := []string{"web-0", "web-1", "web-2", "web-3", "web-4"}
	populate(t, a, names...)

	out, errs, code := runStore(t, "store", "copy", "--from", "bolt:"+a, "--to", etcd, "--etcd-prefix", "/move/")
	if code != exitOK {
		t.Fatalf("copy bbolt → etcd: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"copied 5 targets from bolt:" + a, "verified: all 5 targets of bolt:" + a + " read back equal from " + etcd} {
		if !strings.Contains(out, want) {
			t.Errorf("copy printed\n%s\nwant %q", out, want)
		}
	}
	out, errs, code = runStore(t, "store", "copy", "--from", etcd, "--etcd-prefix", "/move/", "--to", "bbolt:"+b)
	if code != exitOK {
		t.Fatalf("copy etcd → bbolt: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "wrote "+b) {
		t.Errorf("copy printed\n%s\nwant it to name %s", out, b)
	}

	want, got := records(t, a), records(t, b)
	if len(want) != len(names) {
		t.Fatalf("source holds %d targets, want %d", len(want), len(names))
	}
	for _, r := range want {
		if len(r.History.Recommendations) < 2 || len(r.History.ScaleUpEvents) != 1 || r.Last == nil || len(r.Events) == 0 {
			t.Errorf("source %s: %d recommendations, %d scale-up events, %d events, a last decision %v; the test needs histories",
				r.Key, len(r.History.Recommendations), len(r.History.ScaleUpEvents), len(r.Events), r.Last != nil)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targets after bbolt → etcd → bbolt (-want +got):\n%s", diff)
	}
	// The decision log starts anew from each target's last decision (the
	// source's holds all three).
	for path, want := range map[string]int{a: 3, b: 1} {
		st, err := store.Open(path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ds, _, err := st.Decisions(t.Context(), got[0].Key, store.DecisionQuery{})
		st.Close()
		if err != nil || len(ds) != want {
			t.Errorf("%s: %d logged decisions, %v; want %d", path, len(ds), err, want)
		}
	}
	out, _, code = runStore(t, "store", "verify", "--from", "bolt:"+a, "--to", "bolt:"+b)
	if code != exitOK || !strings.Contains(out, "verified: all 5 targets") {
		t.Errorf("verify of the round trip: exit %d\n%s", code, out)
	}

	// Nothing is overwritten: a prefix holding targets, an existing file.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "bolt:" + a, "--to", etcd, "--etcd-prefix", "/move/"}, "already holds 5 targets"},
		{[]string{"--from", etcd, "--etcd-prefix", "/move/", "--to", "bolt:" + b}, "exists: copy into a new file"},
		{[]string{"--from", "bolt:" + filepath.Join(dir, "missing.db"), "--to", "bolt:" + filepath.Join(dir, "c.db")}, "no such file"},
		{[]string{"--from", etcd, "--etcd-prefix", "/moved/", "--to", "bolt:" + filepath.Join(dir, "c.db")}, "holds no target: nothing to copy"},
	} {
		_, errs, code := runStore(t, append([]string{"store", "copy"}, tt.args...)...)
		if code != exitFailed || !strings.Contains(errs, tt.want) {
			t.Errorf("store copy %v: exit %d, stderr\n%s\nwant exit 1 and %q", tt.args, code, errs, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "c.db")); !os.IsNotExist(err) {
		t.Errorf("a failed copy left c.db behind: %v", err)
	}
}

// A bbolt file a server has open is refused: copying is offline.
func TestStoreCopyRefusesLockedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "setpoint.db")
	servertest.Start(t, servertest.Config{Path: path})
	_, errs, code := runStore(t, "store", "copy", "--from", "bolt:"+path, "--to", "bolt:"+filepath.Join(dir, "copy.db"))
	if code != exitFailed || !strings.Contains(errs, "is in use") || !strings.Contains(errs, "stop that server first") {
		t.Errorf("copy of a file a server holds: exit %d, stderr\n%s\nwant exit 1 saying to stop the server", code, errs)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*copy.db*")); len(matches) != 0 {
		t.Errorf("a refused copy left %v behind", matches)
	}
}

// Verification reads every target back: one deleted from the copy, one
// overwritten with bytes that do not decode, one changed and one added
// are each reported, and verify exits 1.
func TestStoreVerifyFindsDifferences(t *testing.T) {
	cluster := etcdtest.Start(t, 3)
	etcd := "etcd:" + strings.Join(cluster.Endpoints, ",")
	a := filepath.Join(t.TempDir(), "a.db")
	populate(t, a, "web-0", "web-1", "web-2", "web-3")
	if out, errs, code := runStore(t, "store", "copy", "--from", "bolt:"+a, "--to", etcd, "--etcd-prefix", "/verify/"); code != exitOK {
		t.Fatalf("copy: exit %d\n%s%s", code, out, errs)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	st, err := etcdstore.New(ctx, cli, etcdstore.Options{Prefix: "/verify/"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key := func(name string) tgt.Key { return tgt.Key{Cluster: "dev", Namespace: "shop", Name: name} }
	if err := st.Delete(ctx, key("web-0")); err != nil {
		t.Fatal(err)
	}
	kb, err := store.KeyBytes(key("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/verify/r/"+string(kb), "not a record"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, key("web-2"), func(r *tgt.Record) error {
		r.LastSeen = r.LastSeen.Add(time.Second)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, key("web-9"), func(r *tgt.Record) error {
		r.LastSeen = exampleNow
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	out, errs, code := runStore(t, "store", "verify", "--from", "bolt:"+a, "--to", etcd, "--etcd-prefix", "/verify/")
	if code != exitFailed {
		t.Errorf("verify: exit %d, want 1", code)
	}
	to := etcd + " (prefix /verify/)"
	for _, want := range []string{
		"missing from " + to + " (1):\n  dev/shop/web-0\n",
		"different in " + to + " (1):\n  dev/shop/web-2: LastSeen\n",
		"cannot be decoded in " + to + " (1):\n  dev/shop/web-1\n",
		"only in " + to + " (1):\n  dev/shop/web-9\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("verify printed\n%s\nwant it to contain %q", out, want)
		}
	}
	wantErr := fmt.Sprintf("error: verification failed: bolt:%s and %s differ (4 targets compared: 1 missing, 1 different, 1 undecodable in the copy, 1 only in the copy)\n", a, to)
	if errs != wantErr {
		t.Errorf("verify's error:\n%s\nwant\n%s", errs, wantErr)
	}
}
