package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/etcdstore"
	"github.com/setpointhq/setpoint/store/record"
	tgt "github.com/setpointhq/setpoint/target"
)

// populate serves the bbolt file path with a real server whose clock
// steps 15 s per decision, decides each of names (NAME in the example's
// cluster "dev", or CLUSTER/NAME) three times, reports the first rescale
// of each as applied (a scale event in its history), and stops the server.
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
			if c, n, ok := strings.Cut(name, "/"); ok {
				req.Target.Cluster, req.Target.Name = c, n
			} else {
				req.Target.Name = name
			}
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
	b, err := boltstore.Open(path, boltstore.Options{})
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
		st, err := boltstore.Open(path, boltstore.Options{})
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
	kb, err := record.Key(key("web-1"))
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

// etcdRecords returns every record of the store under prefix in the etcd
// cluster at endpoints.
func etcdRecords(t *testing.T, endpoints []string, prefix string) []tgt.Record {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := etcdstore.New(t.Context(), cli, etcdstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, next, err := st.List(t.Context(), store.Query{PageSize: store.MaxPageSize})
	if err != nil || next != "" {
		t.Fatalf("List: %v (next %q)", err, next)
	}
	return recs
}

// recordsOf returns the records of recs whose cluster is one of clusters.
func recordsOf(recs []tgt.Record, clusters ...string) []tgt.Record {
	var out []tgt.Record
	for _, r := range recs {
		if slices.Contains(clusters, r.Key.Cluster) {
			out = append(out, r)
		}
	}
	return out
}

// storeStep is one setpointctl store command of a scenario and what it
// must print.
type storeStep struct {
	name string
	// args follow "setpointctl store".
	args []string
	code int
	// want is in stdout when code is exitOK, else in stderr.
	want string
}

// runSteps runs steps in order and stops the test at the first that does
// not exit and print as it must.
func runSteps(t *testing.T, steps []storeStep) {
	t.Helper()
	for _, step := range steps {
		out, errs, code := runStore(t, append([]string{"store"}, step.args...)...)
		got := errs
		if step.code == exitOK {
			got = out
		}
		if code != step.code || !strings.Contains(got, step.want) {
			t.Fatalf("%s: store %s: exit %d\n%s%s\nwant exit %d and %q", step.name, strings.Join(step.args, " "), code, out, errs, step.code, step.want)
		}
	}
}

// One cluster of two moves from a bbolt shard into an etcd shard that
// already holds a third cluster: copy, verify and delete, step by step as
// docs/scale-out.md describes, and each step's refusals. The other
// cluster then moves into an existing bbolt file, written in place.
func TestStoreMoveCluster(t *testing.T) {
	cluster := etcdtest.Start(t, 3)
	etcd := "etcd:" + strings.Join(cluster.Endpoints, ",")
	dir := t.TempDir()
	a, c := filepath.Join(dir, "shard-0.db"), filepath.Join(dir, "shard-2.db")
	populate(t, a, "eu-1/web-0", "eu-1/web-1", "us-1/web-0", "us-1/web-1", "us-1/web-2")
	populate(t, c, "ap-1/web-0")
	shard1 := []string{etcd, "--etcd-prefix", "/shard-1/"}
	if out, errs, code := runStore(t, append([]string{"store", "copy", "--from", "bolt:" + c, "--to"}, shard1...)...); code != exitOK {
		t.Fatalf("seeding shard 1: exit %d\n%s%s", code, out, errs)
	}
	src, third := records(t, a), records(t, c)
	to := etcd + " (prefix /shard-1/)"

	runSteps(t, []storeStep{
		{"copy", []string{"copy", "--from", "bolt:" + a, "--to", etcd, "--etcd-prefix", "/shard-1/", "--cluster", "eu-1"}, exitOK,
			`copied 2 targets of cluster "eu-1" from bolt:` + a + " to " + to + "\n" +
				`verified: all 2 targets of cluster "eu-1" in bolt:` + a + " read back equal from " + to + "\n"},
		{"copy again", []string{"copy", "--from", "bolt:" + a, "--to", etcd, "--etcd-prefix", "/shard-1/", "--cluster", "us-1,eu-1"}, exitFailed,
			to + ` already holds 2 targets of cluster "eu-1"; nothing was copied`},
		{"copy a cluster the source lacks", []string{"copy", "--from", "bolt:" + a, "--to", etcd, "--etcd-prefix", "/shard-1/", "--cluster", "eu-2"}, exitFailed,
			"bolt:" + a + ` holds no target of cluster "eu-2": nothing to copy`},
		{"verify", []string{"verify", "--from", "bolt:" + a, "--to", etcd, "--etcd-prefix", "/shard-1/", "--cluster", "eu-1"}, exitOK,
			`verified: all 2 targets of cluster "eu-1" in bolt:` + a + " read back equal from " + to},
		{"verify every cluster", []string{"verify", "--from", "bolt:" + a, "--to", etcd, "--etcd-prefix", "/shard-1/"}, exitFailed,
			"(5 targets compared: 3 missing, 1 only in the copy)"},
		{"delete", []string{"delete", "--from", "bolt:" + a, "--to", etcd, "--etcd-prefix", "/shard-1/", "--cluster", "eu-1"}, exitOK,
			`deleted 2 targets of cluster "eu-1" from bolt:` + a + "\n"},
		{"delete again", []string{"delete", "--from", "bolt:" + a, "--cluster", "eu-1", "--no-verify"}, exitFailed,
			"bolt:" + a + ` holds no target of cluster "eu-1": nothing to delete`},
	})
	if diff := cmp.Diff(recordsOf(src, "us-1"), records(t, a)); diff != "" {
		t.Errorf("shard 0 after the move (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(third, recordsOf(src, "eu-1")...), etcdRecords(t, cluster.Endpoints, "/shard-1/")); diff != "" {
		t.Errorf("shard 1 after the move (-want +got):\n%s", diff)
	}

	// us-1 into the existing file of shard 2, which holds ap-1. A delete
	// compared with a store that lacks the cluster deletes nothing.
	runSteps(t, []storeStep{
		{"delete before the copy", []string{"delete", "--from", "bolt:" + a, "--to", "bolt:" + c, "--cluster", "us-1"}, exitFailed,
			"verification failed: bolt:" + a + " and bolt:" + c + ` differ in cluster "us-1" (3 targets compared: 3 missing)` + "\nNothing was deleted from bolt:" + a},
		{"copy in place", []string{"copy", "--from", "bolt:" + a, "--to", "bolt:" + c, "--cluster", "us-1"}, exitOK,
			`verified: all 3 targets of cluster "us-1" in bolt:` + a + " read back equal from bolt:" + c},
		{"delete", []string{"delete", "--from", "bolt:" + a, "--to", "bolt:" + c, "--cluster", "us-1"}, exitOK,
			`deleted 3 targets of cluster "us-1" from bolt:` + a},
	})
	if got := records(t, a); len(got) != 0 {
		t.Errorf("shard 0 holds %d targets after both moves, want none", len(got))
	}
	if diff := cmp.Diff(append(third, recordsOf(src, "us-1")...), records(t, c)); diff != "" {
		t.Errorf("shard 2 after the move (-want +got):\n%s", diff)
	}
}

// A cluster copy that fails (a record the source cannot decode) says
// what it leaves in the destination and the command that removes it;
// that command, run after a copy, removes exactly the copied cluster.
func TestStoreCopyClusterFailure(t *testing.T) {
	cluster := etcdtest.Start(t, 1)
	etcd := "etcd:" + strings.Join(cluster.Endpoints, ",")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	populate(t, a, "eu-1/web-0", "eu-1/web-1")
	populate(t, b, "ap-1/web-0")
	if out, errs, code := runStore(t, "store", "copy", "--from", "bolt:"+a, "--to", etcd); code != exitOK {
		t.Fatalf("copy: exit %d\n%s%s", code, out, errs)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	kb, err := record.Key(tgt.Key{Cluster: "eu-1", Namespace: "shop", Name: "web-9"})
	if err != nil {
		t.Fatal(err)
	}
	corrupt := etcdstore.DefaultPrefix + "r/" + string(kb)
	if _, err := cli.Put(t.Context(), corrupt, "not a record"); err != nil {
		t.Fatal(err)
	}
	before := records(t, b)

	_, errs, code := runStore(t, "store", "copy", "--from", etcd, "--to", "bolt:"+b, "--cluster", "eu-1")
	cleanup := "setpointctl store delete --from bolt:" + b + " --cluster eu-1 --no-verify"
	for _, want := range []string{
		"error: copy stopped after 0 targets: store: copy: read: store: record cannot be decoded: eu-1/shop/web-9",
		`The targets of cluster "eu-1" written stay in bolt:` + b + ", and only those: it held none of them before. " +
			"Delete them (" + cleanup + ") before copying again\n",
	} {
		if code != exitFailed || !strings.Contains(errs, want) {
			t.Errorf("failed copy: exit %d, stderr\n%s\nwant exit 1 and %q", code, errs, want)
		}
	}
	if diff := cmp.Diff(before, records(t, b)); diff != "" {
		t.Errorf("the failed copy wrote (-before +after):\n%s", diff)
	}

	// The record repaired, the copy goes through; the cleanup command
	// then takes out what it wrote and nothing else.
	if _, err := cli.Delete(t.Context(), corrupt); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runStore(t, "store", "copy", "--from", etcd, "--to", "bolt:"+b, "--cluster", "eu-1"); code != exitOK {
		t.Fatalf("copy: exit %d\n%s%s", code, out, errs)
	}
	if got := recordsOf(records(t, b), "eu-1"); len(got) != 2 {
		t.Fatalf("the copy wrote %d targets of eu-1, want 2", len(got))
	}
	out, errs, code := runStore(t, strings.Fields(cleanup)[1:]...)
	if want := `deleted 2 targets of cluster "eu-1" from bolt:` + b + "\n"; code != exitOK || out != want {
		t.Errorf("%s: exit %d\n%s%s\nwant exit 0 and %q", cleanup, code, out, errs, want)
	}
	if diff := cmp.Diff(before, records(t, b)); diff != "" {
		t.Errorf("after the cleanup (-before +after):\n%s", diff)
	}
	// And from etcd.
	out, errs, code = runStore(t, "store", "delete", "--from", etcd, "--cluster", "eu-1", "--no-verify")
	if want := `deleted 2 targets of cluster "eu-1" from ` + etcd + " (prefix /setpoint/)\n"; code != exitOK || out != want {
		t.Errorf("delete from etcd: exit %d\n%s%s\nwant exit 0 and %q", code, out, errs, want)
	}
	if got := etcdRecords(t, cluster.Endpoints, etcdstore.DefaultPrefix); len(got) != 0 {
		t.Errorf("etcd holds %d targets after the delete, want none", len(got))
	}
}
