package crash

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/test/internal/acked"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var (
	kills   = flag.Int("crash.kills", 20, "how many times the server is killed")
	workers = flag.Int("crash.workers", 8, "concurrent callers")
	seed    = flag.Uint64("crash.seed", 0, "random seed of the kill moments (0: from the clock)")
	maxUp   = flag.Duration("crash.max-up", 400*time.Millisecond, "longest time the server runs between kills")
)

// binary is the setpoint-server binary the test built.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(acked.Main(m, &binary))
}

// TestCrash kills the server under load and checks that nothing
// acknowledged was lost.
func TestCrash(t *testing.T) {
	rng := acked.Seeded(t, *seed, "crash.seed")
	dir := t.TempDir()
	srv := server(dir, acked.FreeAddr(t))
	client := acked.Dial(t, srv.Addr)
	load := acked.StartLoad(client, 0, *workers)
	slowest := acked.Interrupted(t, srv, client, load, *kills, rng, *maxUp, func(proc *exec.Cmd) {
		if err := proc.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = proc.Wait()
		acked.CheckFile(t, filepath.Join(dir, "setpoint.db"))
	})
	led := &load.Ledger
	t.Logf("kills %d, acknowledged Recommend %d, Observe %d, unacknowledged (failed) calls %d, slowest restart to first decision %v",
		*kills, len(led.Recommends), len(led.Observes), led.Failed, slowest)
}

// TestSIGTERMUnderLoad: SIGTERM while callers keep calling; the server
// exits 0 within its shutdown timeout, and after a restart every
// acknowledged call is there.
func TestSIGTERMUnderLoad(t *testing.T) {
	dir := t.TempDir()
	addr := acked.FreeAddr(t)
	client := acked.Dial(t, addr)
	proc, _ := server(dir, addr).Start(t, client)
	load := acked.StartLoad(client, 0, *workers)
	time.Sleep(300 * time.Millisecond)
	began := time.Now()
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(); err != nil {
		t.Errorf("server after SIGTERM: %v, want exit 0", err)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(began))
	load.Stop()
	acked.CheckFile(t, filepath.Join(dir, "setpoint.db"))
	proc, _ = server(dir, addr).Start(t, client)
	defer func() { _ = proc.Process.Signal(syscall.SIGTERM); _ = proc.Wait() }()
	acked.Verify(t, client, &load.Ledger)
}

// TestBackupRestoreWithBinary follows docs/reliability.md's restore with the
// real binary: a backup taken over AdminService.Backup while callers keep
// calling, the server killed, the backup put in place of the store file in
// a new data directory, the binary started on it: every call acknowledged
// before the backup began is there.
func TestBackupRestoreWithBinary(t *testing.T) {
	dir := t.TempDir()
	addr := acked.FreeAddr(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithConnectParams(acked.FastReconnect))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := setpointv1.NewAutoscalerServiceClient(conn)
	proc, _ := server(dir, addr).Start(t, client)

	before := acked.StartLoad(client, 0, 2)
	time.Sleep(200 * time.Millisecond)
	before.Stop()
	// More callers keep writing while the backup streams.
	during := acked.StartLoad(client, 100, 4)
	time.Sleep(50 * time.Millisecond)
	snap := backupOf(t, conn)
	during.Stop()
	_ = proc.Process.Kill()
	_ = proc.Wait()

	restored := filepath.Join(t.TempDir(), "restored")
	if err := os.MkdirAll(restored, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "setpoint.db"), snap, 0o600); err != nil {
		t.Fatal(err)
	}
	acked.CheckFile(t, filepath.Join(restored, "setpoint.db"))
	proc, _ = server(restored, addr).Start(t, client)
	defer func() { _ = proc.Process.Signal(syscall.SIGTERM); _ = proc.Wait() }()
	acked.Verify(t, client, &before.Ledger)
	t.Logf("backup of %d bytes taken while %d more calls were acknowledged", len(snap), len(during.Ledger.Recommends)+len(during.Ledger.Observes))
}

// backupOf calls AdminService.Backup and checks size and checksum.
func backupOf(t *testing.T, conn *grpc.ClientConn) []byte {
	t.Helper()
	stream, err := setpointv1.NewAdminServiceClient(conn).Backup(t.Context(), &setpointv1.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		data []byte
		size int64
		sum  []byte
	)
	for first := true; ; first = false {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Backup: %v", err)
		}
		if first {
			size = m.GetSize()
		}
		data = append(data, m.GetData()...)
		sum = m.GetSha256()
	}
	if want := sha256.Sum256(data); int64(len(data)) != size || !bytes.Equal(sum, want[:]) {
		t.Fatalf("Backup: %d bytes (announced %d), sha256 %x (announced %x)", len(data), size, want, sum)
	}
	return data
}

// server runs the binary on the store in dir, logging to dir/server.log.
func server(dir, addr string) acked.Server {
	return acked.Server{Binary: binary, DataDir: dir, Log: filepath.Join(dir, "server.log"), Addr: addr}
}
