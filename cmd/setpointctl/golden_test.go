package main

import (
	"bytes"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite the golden files in testdata/golden")

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// TestGolden runs command lines as a user types them and compares what
// they print (stdout, stderr) and their exit code with
// testdata/golden/NAME.txt: help, usage errors, and failures in the
// user's terms. go test -run TestGolden -update-golden rewrites the files.
func TestGolden(t *testing.T) {
	t.Setenv("SETPOINT_TOKEN", "")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir()) // no ~/.kube/config
	addr := startServer(t)
	down := closedAddr(t)
	if _, err := ctl(t.Context(), addr, "recommend", "-f", example); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
	}{
		// Help, exit 0.
		{"help", []string{"--help"}},
		{"help-h", []string{"-h"}},
		{"help-command", []string{"help"}},
		{"no-arguments", nil},
		{"help-list", []string{"list", "--help"}},
		{"help-get", []string{"help", "get"}},
		{"help-explain", []string{"explain", "-h"}},
		{"help-history", []string{"history", "-h"}},
		{"help-watch", []string{"watch", "-h"}},
		{"help-simulate", []string{"simulate", "-h"}},
		{"help-recommend", []string{"recommend", "-h"}},
		{"help-delete", []string{"delete", "-h"}},
		{"help-backup", []string{"backup", "-h"}},
		{"help-certs", []string{"certs", "-h"}},
		{"help-autoscale", []string{"autoscale", "-h"}},
		{"help-import-hpa", []string{"import-hpa", "-h"}},
		{"help-store", []string{"store", "--help"}},
		{"help-store-copy", []string{"store", "copy", "-h"}},
		{"help-store-verify", []string{"help", "store", "verify"}},
		{"help-store-delete", []string{"store", "delete", "-h"}},
		{"help-fleet", []string{"fleet", "--help"}},
		{"fleet-no-subcommand", []string{"fleet"}},
		{"help-fleet-put", []string{"fleet", "put", "-h"}},
		{"help-fleet-get", []string{"help", "fleet", "get"}},
		{"help-fleet-list", []string{"fleet", "list", "-h"}},
		{"help-fleet-explain", []string{"fleet", "explain", "-h"}},
		{"help-fleet-simulate", []string{"fleet", "simulate", "-h"}},
		{"help-fleet-delete", []string{"fleet", "delete", "-h"}},
		// Wrong command lines, exit 2.
		{"unknown-command", []string{"frobnicate"}},
		{"misspelt-command", []string{"lst"}},
		{"unknown-flag", []string{"list", "--bogus"}},
		{"get-no-target", []string{"get"}},
		{"get-two-targets", []string{"get", "a/b/c", "d/e/f"}},
		{"get-bad-key", []string{"get", "dev/web"}},
		{"get-bad-output", []string{"get", "dev/shop/web", "-o", "xml"}},
		{"recommend-no-file", []string{"--addr", addr, "recommend"}},
		{"backup-no-file", []string{"--addr", addr, "backup"}},
		{"autoscale-no-max", []string{"autoscale", "deployment/web"}},
		{"autoscale-bad-workload", []string{"autoscale", "web", "--max", "3"}},
		{"cert-without-key", []string{"--cert", "c.pem", "list"}},
		{"store-copy-no-from", []string{"store", "copy", "--to", "etcd:http://127.0.0.1:2379"}},
		{"store-copy-bad-location", []string{"store", "copy", "--from", "setpoint.db", "--to", "etcd:http://127.0.0.1:2379"}},
		{"store-copy-bad-endpoint", []string{"store", "copy", "--from", "bolt:setpoint.db", "--to", "etcd:127.0.0.1:2379"}},
		{"store-copy-same", []string{"store", "copy", "--from", "bolt:a.db", "--to", "bbolt:a.db"}},
		{"store-copy-empty-cluster", []string{"store", "copy", "--from", "bolt:a.db", "--to", "bolt:b.db", "--cluster", "eu-1,"}},
		{"store-delete-no-cluster", []string{"store", "delete", "--from", "bolt:a.db", "--no-verify"}},
		{"store-delete-neither-to-nor-no-verify", []string{"store", "delete", "--from", "bolt:a.db", "--cluster", "eu-1"}},
		{"store-delete-to-and-no-verify", []string{"store", "delete", "--from", "bolt:a.db", "--to", "bolt:b.db", "--cluster", "eu-1", "--no-verify"}},
		{"fleet-get-no-fleet", []string{"fleet", "get"}},
		{"fleet-get-target-key", []string{"fleet", "get", "dev/shop/web"}},
		{"fleet-explain-bad-output", []string{"fleet", "explain", "shop/web", "-o", "wide"}},
		{"fleet-put-no-file", []string{"--addr", addr, "fleet", "put"}},
		{"fleet-simulate-no-file", []string{"--addr", addr, "fleet", "simulate"}},
		{"fleet-simulate-bad-seed", []string{"--addr", addr, "fleet", "simulate", "-f", "testdata/fleet-simulate.json", "--seed-from", "shop"}},
		{"store-copy-etcd-cert-without-key", []string{"store", "copy", "--from", "bolt:a.db", "--to", "etcd:https://e1:2379", "--etcd-cert", "c.pem"}},
		// Failures, exit 1.
		{"get-not-found", []string{"--addr", addr, "get", "dev/shop/nope"}},
		{"list-no-server", []string{"--addr", down, "list"}},
		{"fleet-get-not-found", []string{"--addr", addr, "fleet", "get", "shop/nope"}},
		{"fleet-put-invalid", []string{"--addr", addr, "fleet", "put", "-f", "testdata/fleet-invalid.yaml"}},
		{"recommend-missing-file", []string{"--addr", addr, "recommend", "-f", "testdata/missing.json"}},
		{"autoscale-no-cluster", []string{"autoscale", "deployment/web", "--max", "3"}},
		{"simulate-no-file", []string{"--addr", addr, "simulate"}},
		{"store-copy-etcd-unreachable", []string{"store", "copy", "--from", "etcd:http://127.0.0.1:1", "--etcd-dial-timeout", "300ms", "--to", "bolt:testdata/never.db"}},
		{"store-verify-missing-file", []string{"store", "verify", "--from", "bolt:testdata/missing.db", "--to", "bolt:testdata/missing-too.db"}},
		{"autoscale-no-kubeconfig", []string{"autoscale", "deployment/web", "--max", "3", "--kubeconfig", "testdata/missing-kubeconfig"}},
		// Success.
		{"history-seeded", []string{"--addr", addr, "history", "dev/shop/web"}},
		{"single-dash-flags", []string{"-addr", addr, "list", "-cluster", "dev"}},
		{"list-one-of-two-servers-down", []string{"--addr", down + "," + addr, "list"}},
		{"fleet-put", []string{"--addr", addr, "fleet", "put", "-f", "testdata/fleet.yaml"}},
		{"fleet-list-before-a-report", []string{"--addr", addr, "fleet", "list", "-o", "wide"}},
		{"fleet-explain-before-a-report", []string{"--addr", addr, "fleet", "explain", "shop/web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, now: func() time.Time { return exampleNow.Add(90 * time.Second) }}
			code := c.execute(t.Context(), tt.args)
			got := "$ setpointctl " + strings.Join(tt.args, " ") + "\n" + stdout.String() +
				"--- stderr\n" + stderr.String() + "--- exit " + string(rune('0'+code)) + "\n"
			got = strings.NewReplacer(addr, "SERVER", down, "NOSERVER").Replace(got)
			golden(t, filepath.Join("testdata", "golden", tt.name+".txt"), got)
		})
	}
}

// golden compares got with the file, or rewrites it with -update-golden.
func golden(t *testing.T, file, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update-golden writes it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", file, diff)
	}
}
