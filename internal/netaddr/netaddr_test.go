package netaddr

import "testing"

func TestLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:7443", true},
		{"127.8.9.10:1", true},
		{"[::1]:7443", true},
		{"localhost:7443", true},
		{"10.0.0.1:7443", false},
		{"[2001:db8::1]:7443", false},
		{"example.com:7443", false},
		{":7443", false},
		{"127.0.0.1", false}, // no port
		{"", false},
	}
	for _, tt := range tests {
		if got := Loopback(tt.addr); got != tt.want {
			t.Errorf("Loopback(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}
