package main

import (
	"crypto/sha256"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/store/boltstore"
	tgt "github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc"
)

// snapshot streams data in chunks with its size and checksum (sum: nil
// announces a wrong one).
type snapshot struct {
	setpointv1.UnimplementedAdminServiceServer
	data []byte
	sum  []byte
}

func (s *snapshot) Backup(_ *setpointv1.BackupRequest, stream setpointv1.AdminService_BackupServer) error {
	for i := 0; i < len(s.data); i += 3 {
		msg := &setpointv1.BackupResponse{Data: s.data[i:min(i+3, len(s.data))]}
		if i == 0 {
			msg.Size = int64(len(s.data))
		}
		if i+3 >= len(s.data) {
			msg.Sha256 = s.sum
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}

// TestBackupFile: backup -o writes the verified snapshot, and leaves no
// file (nor replaces an old one) when verification fails.
func TestBackupFile(t *testing.T) {
	data := []byte("a consistent snapshot of the store")
	sum := sha256.Sum256(data)
	for _, tt := range []struct {
		name string
		sum  []byte
		ok   bool
	}{{"intact", sum[:], true}, {"corrupt", make([]byte, 32), false}} {
		t.Run(tt.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := grpc.NewServer()
			setpointv1.RegisterAdminServiceServer(s, &snapshot{data: data, sum: tt.sum})
			go s.Serve(lis)
			defer s.Stop()
			dir := t.TempDir()
			file := filepath.Join(dir, "setpoint.db")
			if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := ctl(t.Context(), lis.Addr().String(), "backup", "-o", file)
			if (err == nil) != tt.ok {
				t.Fatalf("backup: %q, %v; want ok %v", out, err, tt.ok)
			}
			got, _ := os.ReadFile(file)
			want := map[bool]string{true: string(data), false: "old"}[tt.ok]
			if string(got) != want {
				t.Errorf("file holds %q, want %q", got, want)
			}
			if tt.ok && !strings.Contains(out, "34 bytes, SHA-256 verified") {
				t.Errorf("printed %q", out)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("left files behind: %v", entries)
			}
		})
	}
}

// TestBackupRealServer: backup -o from a real server writes a store file
// that opens and holds the target recorded before.
func TestBackupRealServer(t *testing.T) {
	addr := startServer(t)
	if _, err := ctl(t.Context(), addr, "recommend", "-f", example); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	out, err := ctl(t.Context(), addr, "backup", "-o", file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "SHA-256 verified") {
		t.Errorf("printed %q", out)
	}
	st, err := boltstore.Open(file, boltstore.Options{})
	if err != nil {
		t.Fatalf("the backup does not open as a store: %v", err)
	}
	defer st.Close()
	if _, err := st.Get(t.Context(), tgt.Key{Cluster: "dev", Namespace: "shop", Name: "web"}); err != nil {
		t.Fatalf("the backup lacks dev/shop/web: %v", err)
	}
}
