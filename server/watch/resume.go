package watch

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// ResumeKeySize is the length in bytes of the secret that makes a tenant's
// Watch resume points (package server's Options.ResumeKey).
const ResumeKeySize = 32

// maxSealedRevision bounds the revisions a resume point can carry: the low
// 16 bits of the sealed block are a check that is zero for every point the
// server issued.
const maxSealedRevision = 1<<48 - 1

// errResumePoint is the error for a resume_after the server did not issue
// to this caller (forged, garbled, another principal's, or made under
// another key).
var errResumePoint = errors.New("not a resume point this server gave you")

// ResumePoints turns the change feed's revisions into the resume points a
// caller that may not read every cluster sees, and back. A revision is one
// counter across all tenants, so showing it would tell a tenant how much
// and when the others write; a resume point is the revision sealed under a
// key of the principal's own (derived from the server's secret and the
// principal's name) by a keyed 64-bit permutation. Points of one stream
// look unrelated to each other, carry nothing a tenant can decode, and are
// refused for any other principal. Points survive a restart when the
// server keeps its secret (setpoint-server keeps it beside its data).
type ResumePoints struct {
	secret []byte
}

// NewResumePoints returns resume points made under secret; a nil secret
// is replaced by a random one (points then last as long as the process).
func NewResumePoints(secret []byte) (*ResumePoints, error) {
	if secret == nil {
		secret = make([]byte, ResumeKeySize)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
	}
	if len(secret) < 16 {
		return nil, errors.New("server: the resume key must be at least 16 bytes")
	}
	return &ResumePoints{secret: secret}, nil
}

// sealer is the permutation of one principal.
type sealer struct{ key []byte }

// sealer returns principal's permutation.
func (r *ResumePoints) sealer(principal string) sealer {
	m := hmac.New(sha256.New, r.secret)
	m.Write([]byte("setpoint watch resume point\x00"))
	m.Write([]byte(principal))
	return sealer{key: m.Sum(nil)}
}

// rounds is the number of Feistel rounds; four with a pseudorandom round
// function make a strong pseudorandom permutation (Luby–Rackoff).
const rounds = 4

// round is the Feistel round function: 32 bits of HMAC-SHA256 of the
// round number and the half.
func (s sealer) round(i int, half uint32) uint32 {
	var in [5]byte
	in[0] = byte(i)
	binary.BigEndian.PutUint32(in[1:], half)
	m := hmac.New(sha256.New, s.key)
	m.Write(in[:])
	return binary.BigEndian.Uint32(m.Sum(nil))
}

// seal returns the resume point of revision rev (rev ≤ maxSealedRevision).
func (s sealer) seal(rev uint64) uint64 {
	b := rev << 16
	l, r := uint32(b>>32), uint32(b)
	for i := range rounds {
		l, r = r, l^s.round(i, r)
	}
	return uint64(l)<<32 | uint64(r)
}

// open returns the revision of resume point p, or errResumePoint when p
// was not sealed by this sealer.
func (s sealer) open(p uint64) (uint64, error) {
	l, r := uint32(p>>32), uint32(p)
	for i := rounds - 1; i >= 0; i-- {
		l, r = r^s.round(i, l), l
	}
	b := uint64(l)<<32 | uint64(r)
	if b&0xffff != 0 {
		return 0, errResumePoint
	}
	return b >> 16, nil
}
