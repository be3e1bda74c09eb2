package main

import (
	"flag"
	"testing"
	"time"
)

func parse(t *testing.T, args ...string) *Config {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &c
}

func TestDefaultsValidate(t *testing.T) {
	c := parse(t, "-leader-election-identity=a")
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	s := c.Settings()
	if s.Tolerance != nil || s.CPUInitializationPeriod != nil || s.InitialReadinessDelay != nil || s.DownscaleStabilizationWindow != nil {
		t.Errorf("unset settings must stay unset: %+v", s)
	}
	if c.SyncPeriod != 15*time.Second {
		t.Errorf("sync period = %v", c.SyncPeriod)
	}
}

func TestSettingsFlags(t *testing.T) {
	c := parse(t, "-leader-election-identity=a", "-tolerance=0.05", "-downscale-stabilization-window=1m")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := c.Settings()
	if s.Tolerance == nil || *s.Tolerance != 0.05 || s.DownscaleStabilizationWindow == nil || *s.DownscaleStabilizationWindow != time.Minute {
		t.Errorf("settings = %+v", s)
	}
}

func TestValidateRejects(t *testing.T) {
	for name, args := range map[string][]string{
		"cert without key":  {"-tls-cert-file=c.pem"},
		"insecure with tls": {"-insecure", "-tls-ca-file=ca.pem"},
		"zero sync period":  {"-sync-period=0s"},
		"tolerance too big": {"-tolerance=1.5"},
		"negative delay":    {"-initial-readiness-delay=-1s"},
		"lease order":       {"-leader-election-lease-duration=5s", "-leader-election-renew-deadline=10s"},
		"no address":        {"-service-address="},
	} {
		t.Run(name, func(t *testing.T) {
			c := parse(t, append([]string{"-leader-election-identity=a"}, args...)...)
			if err := c.Validate(); err == nil {
				t.Errorf("Validate accepted %v", args)
			}
		})
	}
}
