package setpointclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// ErrBackupCorrupt is returned by Backup when the snapshot received does
// not match the size or SHA-256 the server announced.
var ErrBackupCorrupt = errors.New("setpointclient: backup corrupt")

// Backup copies a consistent snapshot of the server's store to w
// (AdminService.Backup; admin principals only) and returns its size in
// bytes. It checks the size announced by the first message and the SHA-256
// announced by the last; on a mismatch or a broken stream it returns an
// error and what w holds must be discarded.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Admin.Backup(ctx, &setpointv1.BackupRequest{})
	if err != nil {
		return 0, err
	}
	h := sha256.New()
	var (
		n        int64
		size     int64 = -1
		checksum []byte
	)
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
		if first {
			size = msg.GetSize()
		}
		if len(msg.GetSha256()) > 0 {
			checksum = msg.GetSha256()
		}
		if _, err := w.Write(msg.GetData()); err != nil {
			return n, fmt.Errorf("setpointclient: backup: %w", err)
		}
		h.Write(msg.GetData())
		n += int64(len(msg.GetData()))
	}
	switch {
	case size >= 0 && n != size:
		return n, fmt.Errorf("%w: received %d bytes, announced %d", ErrBackupCorrupt, n, size)
	case checksum == nil:
		return n, fmt.Errorf("%w: no SHA-256 announced", ErrBackupCorrupt)
	case !bytes.Equal(h.Sum(nil), checksum):
		return n, fmt.Errorf("%w: SHA-256 %x, announced %x", ErrBackupCorrupt, h.Sum(nil), checksum)
	}
	return n, nil
}
