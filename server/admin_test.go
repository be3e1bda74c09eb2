package server_test

import (
	"bytes"

	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// backup calls AdminService.Backup and returns the snapshot, after checking
// the stream's framing: size on the first message, equal to the bytes
// received, and the SHA-256 of them on the last.
func backup(t testing.TB, addr string) []byte {
	t.Helper()
	stream, err := setpointv1.NewAdminServiceClient(dial(t, addr)).Backup(t.Context(), &setpointv1.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		data     bytes.Buffer
		size     int64 = -1
		sum      []byte
		messages int
	)
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Backup: %v", err)
		}
		if messages == 0 {
			size = m.GetSize()
		} else if m.GetSize() != 0 {
			t.Errorf("message %d sets size %d; only the first may", messages, m.GetSize())
		}
		if sum != nil {
			t.Errorf("message %d follows the one with the checksum", messages)
		}
		sum = m.GetSha256()
		data.Write(m.GetData())
		messages++
	}
	if int64(data.Len()) != size {
		t.Fatalf("Backup: %d bytes received, size said %d", data.Len(), size)
	}
	if want := sha256.Sum256(data.Bytes()); !bytes.Equal(sum, want[:]) {
		t.Fatalf("Backup: sha256 %x, want %x", sum, want)
	}
	return data.Bytes()
}

// TestBackupWhileServingAndRestore takes a backup while callers keep
// deciding, checks the snapshot's consistency, and starts a new server on
// it: every decision acknowledged before the backup began is there, with
// its history.
func TestBackupWhileServingAndRestore(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	ctx := t.Context()

	// Decided before the backup: must all be in it.
	const before = 20
	for i := range before {
		if _, err := c.Recommend(ctx, request(fmt.Sprintf("before-%d", i), 3, ts.clock.Now())); err != nil {
			t.Fatal(err)
		}
	}
	// Writers keep going during the backup.
	var (
		wg      sync.WaitGroup
		during  atomic.Int64
		stop    = make(chan struct{})
		loadErr atomic.Value
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Recommend(ctx, request(fmt.Sprintf("during-%d-%d", w, i%50), 3, ts.clock.Now())); err != nil {
					loadErr.Store(err)
					return
				}
				during.Add(1)
			}
		})
	}
	testkit.Eventually(t, time.Minute, "20 decisions during the load", func() error {
		if n := during.Load(); n < 20 {
			return fmt.Errorf("%d decisions", n)
		}
		return nil
	})
	snap := backup(t, ts.addr)
	close(stop)
	wg.Wait()
	if err, _ := loadErr.Load().(error); err != nil {
		t.Fatalf("Recommend during backup: %v", err)
	}

	// Restore: the snapshot is a store file.
	path := filepath.Join(t.TempDir(), "restored.db")
	if err := os.WriteFile(path, snap, 0o600); err != nil {
		t.Fatal(err)
	}
	checkBolt(t, path)
	restored := start(t, setup{path: path})
	rc := restored.client(t)
	for i := range before {
		got, err := rc.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key(fmt.Sprintf("before-%d", i))})
		if err != nil {
			t.Fatalf("restored GetTarget before-%d: %v", i, err)
		}
		if n := len(got.GetTarget().GetHistory().GetRecommendations()); n == 0 {
			t.Errorf("restored before-%d has no history", i)
		}
	}
	// The restored server decides on from the restored history.
	if _, err := rc.Recommend(ctx, request("before-0", 5, restored.clock.Now().Add(time.Minute))); err != nil {
		t.Fatalf("Recommend on the restored store: %v", err)
	}
}

// TestBackupNeedsAdmin: with authentication on, Backup is refused to
// anyone but an admin principal; it never streams data to them.
func TestBackupNeedsAdmin(t *testing.T) {
	auth := authFromFile(t, `{"principals": [{"name": "a", "role": "cluster:eu1", "token_sha256": ["`+sha256hex("agent-token")+`"]}]}`)
	ts := start(t, setup{opts: server.Options{Auth: auth}})
	for _, tt := range []struct {
		token string
		want  codes.Code
	}{{"", codes.Unauthenticated}, {"agent-token", codes.PermissionDenied}} {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecureCreds())}
		if tt.token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(bearer(tt.token)))
		}
		stream, err := setpointv1.NewAdminServiceClient(dial(t, ts.addr, opts...)).Backup(t.Context(), &setpointv1.BackupRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != tt.want {
			t.Errorf("Backup with token %q: %v, want %v", tt.token, err, tt.want)
		}
	}
}

// checkBolt runs bbolt's consistency check over the file at path.
func checkBolt(t testing.TB, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("check %s: %v", path, err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("check %s: %v", path, err)
		}
		return nil
	}); err != nil {
		t.Fatalf("check %s: %v", path, err)
	}
}
