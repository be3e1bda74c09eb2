package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestResumeKey: the first start creates resume.key in the data directory
// (0600), later starts read the same secret, and a file too short to be a
// secret is refused.
func TestResumeKey(t *testing.T) {
	dir := t.TempDir()
	first, err := resumeKey(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "resume.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || len(first) != 32 {
		t.Errorf("resume.key: mode %v, %d bytes; want 0600, 32 bytes", fi.Mode().Perm(), len(first))
	}
	again, err := resumeKey(Config{DataDir: dir})
	if err != nil || !bytes.Equal(first, again) {
		t.Errorf("second start: %x, %v; want the first key %x", again, err, first)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := resumeKey(Config{DataDir: dir, ResumeKeyFile: short}); err == nil {
		t.Error("a 9-byte secret was accepted")
	}
	if _, err := resumeKey(Config{DataDir: dir, ResumeKeyFile: filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing -resume-key-file was accepted")
	}
}
