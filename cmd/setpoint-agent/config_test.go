package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/setpointhq/setpoint/agent"
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

func TestServeFlag(t *testing.T) {
	for _, tc := range []struct {
		arg               string
		autoscalers, hpas bool
	}{
		{"", true, false},
		{"-serve=autoscalers", true, false},
		{"-serve=hpas", false, true},
		{"-serve=both", true, true},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			args := []string{"-leader-election-identity=a", "-console-url=https://setpoint.example.com/console/"}
			if tc.arg != "" {
				args = append(args, tc.arg)
			}
			c := parse(t, args...)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			s := agent.Serve(c.Serve)
			if s.Autoscalers() != tc.autoscalers || s.HPAs() != tc.hpas {
				t.Errorf("serve %q: autoscalers %v, hpas %v", c.Serve, s.Autoscalers(), s.HPAs())
			}
		})
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
		"unknown serve":     {"-serve=deployments"},
		"console not a URL": {"-console-url=setpoint:7444"},
		"negative window":   {"-stand-down-window=-1s"},
	} {
		t.Run(name, func(t *testing.T) {
			c := parse(t, append([]string{"-leader-election-identity=a"}, args...)...)
			if err := c.Validate(); err == nil {
				t.Errorf("Validate accepted %v", args)
			}
		})
	}
}

// TestUsage checks -help: every flag in a group, the agent's flags first
// and the logging flags only named at the end.
func TestUsage(t *testing.T) {
	fs := flag.NewFlagSet("setpoint-agent", flag.ContinueOnError)
	var c Config
	c.RegisterFlags(fs)
	logging := flag.NewFlagSet("logging", flag.ContinueOnError)
	klog.InitFlags(logging)
	grouped := map[string]bool{}
	for _, g := range flagGroups {
		for _, name := range g.flags {
			grouped[name] = true
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !grouped[f.Name] {
			t.Errorf("flag -%s is in no group of -help", f.Name)
		}
	})
	var b strings.Builder
	usage(&b, fs, logging)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) > 50 {
		t.Errorf("-help prints %d lines, want at most 50", len(lines))
	}
	for i, l := range lines[:len(lines)-1] {
		if strings.Contains(l, "log_file") || strings.Contains(l, "vmodule") {
			t.Errorf("line %d names a logging flag before the last line: %q", i+1, l)
		}
	}
	for _, want := range []string{"-kube-api-qps float", "-workers int", "-tolerance float", "(default 15s)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("-help lacks %q:\n%s", want, b.String())
		}
	}
}

// TestKubeConfigErrors checks a missing or empty Kubernetes configuration
// is named with what to do, not client-go's KUBERNETES_MASTER hint.
func TestKubeConfigErrors(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path, want string
	}{
		{"none outside a pod", "", "pass -kubeconfig FILE"},
		{"missing file", filepath.Join(dir, "nope"), "no such file"},
		{"empty file", empty, "names no cluster"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kubeConfig(tt.path)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "KUBERNETES_MASTER") {
				t.Errorf("error %q, want one containing %q and not KUBERNETES_MASTER", err, tt.want)
			}
		})
	}
}
