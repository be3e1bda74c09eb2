package setpointclient_test

import (
	"crypto/tls"
	"testing"

	"github.com/setpointhq/setpoint/clients/setpointclient"
)

func TestDialRefusesPlaintextTokensOffLoopback(t *testing.T) {
	tests := []struct {
		addr string
		opts setpointclient.Options
		ok   bool
	}{
		{"127.0.0.1:7443", setpointclient.Options{Token: "t"}, true},
		{"localhost:7443", setpointclient.Options{Token: "t"}, true},
		{"[::1]:7443", setpointclient.Options{Token: "t"}, true},
		{"setpoint.example:7443", setpointclient.Options{}, true},
		{"setpoint.example:7443", setpointclient.Options{Token: "t"}, false},
		{"setpoint.example:7443", setpointclient.Options{Token: "t", TLS: &tls.Config{MinVersion: tls.VersionTLS12}}, true},
	}
	for _, tt := range tests {
		c, err := setpointclient.Dial(tt.addr, tt.opts)
		if (err == nil) != tt.ok {
			t.Errorf("Dial(%s, token=%v, tls=%v) = %v, want ok=%v", tt.addr, tt.opts.Token != "", tt.opts.TLS != nil, err, tt.ok)
		}
		if c != nil {
			c.Close()
		}
	}
}

func TestTLSFiles(t *testing.T) {
	if _, err := (setpointclient.TLSFiles{Cert: "c.pem"}).Config(); err == nil {
		t.Error("a certificate without a key was accepted")
	}
	if _, err := (setpointclient.TLSFiles{CA: "missing.pem"}).Config(); err == nil {
		t.Error("a missing CA file was accepted")
	}
}
