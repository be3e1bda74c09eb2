package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// A second server on the same data directory fails (after
// store.DefaultLockTimeout, a second) saying the store file is locked by
// another process.
func TestSecondServerOnTheSameDataDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := defaults(t, "-insecure-dev", "-listen", "127.0.0.1:0", "-metrics-listen", "", "-data-dir", dir)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan listening, 1), make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() { done <- run(ctx, cfg, log, ready) }()
	<-ready
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("first server: %v", err)
		}
	}()

	err := run(t.Context(), cfg, log, nil)
	want := filepath.Join(dir, "setpoint.db") + " is locked by another process"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second server: %v, want an error containing %q", err, want)
	}
}
