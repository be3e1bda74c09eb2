// Command setpointctl is the command line of Setpoint: it reads what the
// service keeps (targets, their last decision in words, their history), follows
// decisions as they happen, asks what-if questions, backs the store up, and
// creates the agent's Autoscaler objects in a cluster.
//
//	setpointctl [flags] list [--cluster C] [--namespace N] [-o table|wide|json|yaml]
//	setpointctl [flags] get CLUSTER/NAMESPACE/NAME [-o table|wide|json|yaml]
//	setpointctl [flags] explain CLUSTER/NAMESPACE/NAME
//	setpointctl [flags] history CLUSTER/NAMESPACE/NAME [--decisions [--since D]] [-o table|json|yaml]
//	setpointctl [flags] watch [--cluster C] [--namespace N] [--name NAME] [--resume-after REV] [--count N] [-o table|json]
//	setpointctl [flags] simulate -f FILE [--seed-from CLUSTER/NAMESPACE/NAME] [-o table|wide|json|yaml]
//	setpointctl [flags] recommend -f FILE
//	setpointctl [flags] delete CLUSTER/NAMESPACE/NAME
//	setpointctl [flags] backup -o FILE
//	setpointctl autoscale KIND/NAME --max N [--min N] [--cpu-percent P] [-n NS] [--name NAME] [--dry-run]
//	setpointctl import-hpa [NAME...] [-n NS | -A] [-f FILE] [--apply]
//
// Connection flags (before the command): -addr (default 127.0.0.1:7443),
// -token (default $SETPOINT_TOKEN), -tls, -ca, -cert, -key, -server-name.
// autoscale and import-hpa talk to a Kubernetes cluster instead, through
// --kubeconfig (default $KUBECONFIG or ~/.kube/config) and --context.
// Command flags may come before or after the command's arguments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, now: time.Now}
	err := c.run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "setpointctl:", err)
		printViolations(os.Stderr, err)
		os.Exit(1)
	}
}

// printViolations lists the invalid fields an INVALID_ARGUMENT names, in
// field order.
func printViolations(w io.Writer, err error) {
	v := setpointclient.FieldViolations(err)
	for _, f := range slices.Sorted(maps.Keys(v)) {
		fmt.Fprintf(w, "  %s: %s\n", f, v[f])
	}
}

// Config is setpointctl's connection configuration.
type Config struct {
	// Addr is the server's address.
	Addr string
	// Token is the bearer token.
	Token string
	// TLS enables TLS; implied by any TLS file.
	TLS bool
	// Files are the TLS files.
	Files setpointclient.TLSFiles
}

// RegisterFlags registers the connection flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", setpointclient.DefaultAddr, "server address (host:port)")
	fs.StringVar(&c.Token, "token", os.Getenv("SETPOINT_TOKEN"), "bearer token (default $SETPOINT_TOKEN)")
	fs.BoolVar(&c.TLS, "tls", false, "use TLS (implied by -ca, -cert)")
	fs.StringVar(&c.Files.CA, "ca", "", "CA (PEM) verifying the server; default: system roots")
	fs.StringVar(&c.Files.Cert, "cert", "", "client certificate (PEM) for mutual TLS")
	fs.StringVar(&c.Files.Key, "key", "", "client key (PEM)")
	fs.StringVar(&c.Files.ServerName, "server-name", "", "name to verify in the server's certificate")
}

// Validate checks the configuration's values.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return errors.New("-addr must be set")
	}
	if (c.Files.Cert == "") != (c.Files.Key == "") {
		return errors.New("-cert and -key must be set together")
	}
	return nil
}

// Dial connects to the configured server.
func (c *Config) Dial() (*setpointclient.Client, error) {
	opts := setpointclient.Options{Token: c.Token}
	if c.TLS || c.Files.CA != "" || c.Files.Cert != "" {
		tc, err := c.Files.Config()
		if err != nil {
			return nil, err
		}
		opts.TLS = tc
	}
	return setpointclient.Dial(c.Addr, opts)
}

const usage = `usage: setpointctl [connection flags] COMMAND [ARGS]

Reading the service:
  list [--cluster C] [--namespace N]      list targets (-o table|wide|json|yaml)
  get CLUSTER/NAMESPACE/NAME              show one target (-o table|wide|json|yaml)
  explain CLUSTER/NAMESPACE/NAME          the target's last decision, in words
  history CLUSTER/NAMESPACE/NAME          recommendations, scale events, observed events
                                          (--decisions [--since 1h]: the decision log)
  watch [--cluster C] [--namespace N] [--name NAME] [--resume-after REV] [--count N]
                                          follow decisions and observations as they happen
Asking it:
  simulate -f FILE [--seed-from KEY]      what-if: run a SimulateRequest (JSON or YAML), print each step
  recommend -f FILE                       send a RecommendRequest (protojson; "-" reads stdin)
  delete CLUSTER/NAMESPACE/NAME           forget a target
  backup -o FILE                          copy a consistent snapshot of the store (admins)
In a cluster (kubeconfig):
  autoscale KIND/NAME --max N [--min N] [--cpu-percent P] [-n NS] [--name NAME] [--dry-run]
                                          create an Autoscaler for a workload, like kubectl autoscale
  import-hpa [NAME...] [-n NS | -A] [-f FILE] [--apply]
                                          turn HorizontalPodAutoscalers into Autoscalers (print, or apply)

Connection flags:`

// cli is one invocation's environment.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// now is the clock ages are computed from.
	now func() time.Time
}

// command is one subcommand: it registers its flags on fs and runs with
// the positional arguments.
type command struct {
	// server is true when the command calls the Setpoint server.
	server bool
	// min and max bound the number of positional arguments (max < 0: any).
	min, max int
	flags    func(fs *flag.FlagSet) func(ctx context.Context, env *env, args []string) error
}

// env is what a command runs with.
type env struct {
	*cli
	client *setpointclient.Client
}

var commands = map[string]command{
	"list":       {server: true, min: 0, max: 0, flags: listCmd},
	"get":        {server: true, min: 1, max: 1, flags: getCmd},
	"explain":    {server: true, min: 1, max: 1, flags: explainCmd},
	"history":    {server: true, min: 1, max: 1, flags: historyCmd},
	"watch":      {server: true, min: 0, max: 0, flags: watchCmd},
	"simulate":   {server: true, min: 0, max: 0, flags: simulateCmd},
	"recommend":  {server: true, min: 0, max: 0, flags: recommendCmd},
	"delete":     {server: true, min: 1, max: 1, flags: deleteCmd},
	"backup":     {server: true, min: 0, max: 0, flags: backupCmd},
	"autoscale":  {min: 1, max: 1, flags: autoscaleCmd},
	"import-hpa": {min: 0, max: -1, flags: importHPACmd},
}

// run executes one command line.
func (c *cli) run(ctx context.Context, args []string) error {
	var cfg Config
	fs := flag.NewFlagSet("setpointctl", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() { fmt.Fprintln(c.stderr, usage); fs.PrintDefaults() }
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no command")
	}
	name := fs.Arg(0)
	cmd, ok := commands[name]
	if !ok {
		return fmt.Errorf("unknown command %q (setpointctl -h lists them)", name)
	}
	cfs := flag.NewFlagSet(name, flag.ContinueOnError)
	cfs.SetOutput(c.stderr)
	runCmd := cmd.flags(cfs)
	pos, err := parseInterspersed(cfs, fs.Args()[1:])
	if err != nil {
		return err
	}
	if len(pos) < cmd.min || (cmd.max >= 0 && len(pos) > cmd.max) {
		return fmt.Errorf("%s: wrong number of arguments (%d); see setpointctl -h", name, len(pos))
	}
	e := &env{cli: c}
	if cmd.server {
		if e.client, err = cfg.Dial(); err != nil {
			return err
		}
		defer e.client.Close()
	}
	return runCmd(ctx, e, pos)
}

// parseInterspersed parses flags wherever they appear among the
// positional arguments (as kubectl does) and returns the positional ones;
// "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if args = fs.Args(); len(args) == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// outputFlag registers -o with the formats allowed.
func outputFlag(fs *flag.FlagSet, formats ...string) *string {
	o := fs.String("o", formats[0], "output format: "+strings.Join(formats, ", "))
	fs.StringVar(o, "output", formats[0], "same as -o")
	return o
}
