package server

import (
	"crypto/sha256"
	"hash"
	"log/slog"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/store"
	"google.golang.org/grpc"
)

// backupChunk is the most snapshot bytes one BackupResponse carries: well
// under every client's default 4 MiB receive limit.
const backupChunk = 1 << 20

// admin implements setpointv1.AdminServiceServer.
type admin struct {
	setpointv1.UnimplementedAdminServiceServer

	store store.Store
	log   *slog.Logger
}

// Backup streams a consistent snapshot of the store (Store.Backup):
// the first message carries the size, the last the SHA-256 of the whole,
// and the data in between is a store file setpoint-server can start from.
func (a *admin) Backup(_ *setpointv1.BackupRequest, stream grpc.ServerStreamingServer[setpointv1.BackupResponse]) error {
	ctx := stream.Context()
	w := &backupWriter{stream: stream, sum: sha256.New(), next: &setpointv1.BackupResponse{}}
	if _, err := a.store.Backup(ctx, w.size, w); err != nil {
		return toStatus(ctx, a.log, err)
	}
	w.next.Sha256 = w.sum.Sum(nil)
	if err := stream.Send(w.next); err != nil {
		return toStatus(ctx, a.log, err)
	}
	return nil
}

// backupWriter cuts the snapshot into BackupResponses of at most
// backupChunk bytes. It always holds the next message back, so that the
// last one can carry the checksum.
type backupWriter struct {
	stream grpc.ServerStreamingServer[setpointv1.BackupResponse]
	sum    hash.Hash
	next   *setpointv1.BackupResponse
}

func (w *backupWriter) size(n int64) error {
	w.next.Size = n
	return nil
}

func (w *backupWriter) Write(p []byte) (int, error) {
	w.sum.Write(p)
	written := len(p)
	for len(p) > 0 {
		if len(w.next.Data) == backupChunk {
			if err := w.stream.Send(w.next); err != nil {
				return written - len(p), err
			}
			w.next = &setpointv1.BackupResponse{Data: make([]byte, 0, backupChunk)}
		}
		if w.next.Data == nil {
			w.next.Data = make([]byte, 0, backupChunk)
		}
		n := min(len(p), backupChunk-len(w.next.Data))
		w.next.Data = append(w.next.Data, p[:n]...)
		p = p[n:]
	}
	return written, nil
}
