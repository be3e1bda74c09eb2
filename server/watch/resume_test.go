package watch

import (
	"bytes"
	"errors"
	"testing"
)

// TestResumePointsRoundTrip: a principal's point opens to its revision
// under the same key (a restart keeping the secret included), and is
// refused for another principal, under another key, and when garbled. The
// server's Watch tests (package server) cover the same over gRPC.
func TestResumePointsRoundTrip(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, ResumeKeySize)
	r, err := NewResumePoints(secret)
	if err != nil {
		t.Fatal(err)
	}
	restarted, err := NewResumePoints(bytes.Clone(secret))
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewResumePoints(bytes.Repeat([]byte{8}, ResumeKeySize))
	if err != nil {
		t.Fatal(err)
	}
	for _, rev := range []uint64{0, 1, 2, 1000, maxSealedRevision} {
		p := r.sealer("eu1-reader").seal(rev)
		if got, err := restarted.sealer("eu1-reader").open(p); err != nil || got != rev {
			t.Errorf("open(seal(%d)) = %d, %v; want %d", rev, got, err, rev)
		}
		if p == rev && rev > 1 {
			t.Errorf("seal(%d) = %d: the revision shows", rev, p)
		}
		if _, err := r.sealer("us1-reader").open(p); !errors.Is(err, errResumePoint) {
			t.Errorf("another principal opened the point of %d: %v", rev, err)
		}
		if _, err := other.sealer("eu1-reader").open(p); !errors.Is(err, errResumePoint) {
			t.Errorf("another key opened the point of %d: %v", rev, err)
		}
		if _, err := r.sealer("eu1-reader").open(p ^ 1); !errors.Is(err, errResumePoint) {
			t.Errorf("a garbled point of %d opened: %v", rev, err)
		}
	}
	if _, err := NewResumePoints(make([]byte, 15)); err == nil {
		t.Error("a 15-byte resume key was accepted")
	}
}
