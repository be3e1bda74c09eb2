// Command setpointctl is the command line of Setpoint: it reads what the
// service keeps (targets, their last decision in words, their history), follows
// decisions as they happen, asks what-if questions, puts and explains fleets
// (one autoscaler over a workload in several clusters), backs the store up,
// issues the certificates of an installation, creates the agent's
// Autoscaler objects in a cluster, and copies a store between bbolt and
// etcd (offline, verified target by target).
//
//	setpointctl list [--cluster C] [--namespace N] [-o table|wide|json|yaml]
//	setpointctl get CLUSTER/NAMESPACE/NAME [-o table|wide|json|yaml]
//	setpointctl explain CLUSTER/NAMESPACE/NAME
//	setpointctl history CLUSTER/NAMESPACE/NAME [--decisions [--since D]] [-o table|json|yaml]
//	setpointctl watch [--cluster C] [--namespace N] [--name NAME] [--resume-after REV] [--count N] [-o table|json]
//	setpointctl simulate -f FILE [--seed-from CLUSTER/NAMESPACE/NAME] [-o table|wide|json|yaml]
//	setpointctl recommend -f FILE
//	setpointctl delete CLUSTER/NAMESPACE/NAME
//	setpointctl fleet put -f FILE
//	setpointctl fleet get|explain|delete NAMESPACE/NAME [-o table|wide|json|yaml]
//	setpointctl fleet list [--namespace N] [-o table|wide|json|yaml]
//	setpointctl fleet simulate -f FILE [--seed-from NAMESPACE/NAME] [-o table|wide|json|yaml]
//	setpointctl backup -o FILE
//	setpointctl certs [--dir DIR] [--cluster NAME]... [--server-name NAME]...
//	setpointctl store copy|verify --from STORE --to STORE [--etcd-prefix P] [--etcd-ca F --etcd-cert F --etcd-key F]
//	setpointctl autoscale KIND/NAME --max N [--min N] [--cpu-percent P] [-n NS] [--name NAME] [--dry-run]
//	setpointctl import-hpa [NAME...] [-n NS | -A] [-f FILE] [--apply]
//	setpointctl completion bash|zsh|fish|powershell
//
// Connection flags, before or after the command: --addr (default
// 127.0.0.1:7443), --token (default $SETPOINT_TOKEN), --tls, --ca, --cert,
// --key, --server-name; the single-dash spelling (-addr) is accepted too.
// autoscale and import-hpa talk to a Kubernetes cluster instead, through
// --kubeconfig (default $KUBECONFIG or ~/.kube/config) and --context.
//
// setpointctl exits 0 on success (help included), 1 when the command
// failed, and 2 when the command line itself is wrong.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, now: time.Now}
	code := c.execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // the command ran and failed
	exitUsage   = 2 // the command line is wrong
	programName = "setpointctl"
)

// cli is one invocation's environment.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// now is the clock ages are computed from.
	now func() time.Time
}

// execute runs one command line, writes a failure to stderr in the
// user's terms, and returns the process's exit code.
func (c *cli) execute(ctx context.Context, args []string) int {
	err := c.run(ctx, args)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(c.stderr, "error:", err)
	var u *usageError
	if errors.As(err, &u) {
		if u.cmd != "" {
			fmt.Fprintf(c.stderr, "Run '%s --help' for usage.\n", u.cmd)
		}
		return exitUsage
	}
	printViolations(c.stderr, err)
	return exitFailed
}

// run executes one command line and returns its error, rewritten in the
// user's terms.
func (c *cli) run(ctx context.Context, args []string) error {
	root := c.rootCommand()
	root.SetArgs(longFlagsDoubleDash(root, args))
	root.SetIn(c.stdin)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	var u *usageError
	if !errors.As(err, &u) && !ran(cmd) {
		// Cobra's own complaints (unknown command or flag) come before
		// any command runs.
		return &usageError{msg: err.Error(), cmd: cmd.CommandPath()}
	}
	return err
}

// ranAnnotation marks a command whose RunE started.
const ranAnnotation = "setpointctl.dev/ran"

func ran(cmd *cobra.Command) bool { return cmd != nil && cmd.Annotations[ranAnnotation] == "true" }

// Command groups, in the order help lists them.
var groups = []*cobra.Group{
	{ID: "read", Title: "Reading the service:"},
	{ID: "ask", Title: "Asking it:"},
	{ID: "fleet", Title: "One workload in several clusters:"},
	{ID: "cluster", Title: "In a cluster (through your kubeconfig):"},
	{ID: "setup", Title: "Setting up:"},
}

const rootLong = `setpointctl talks to a Setpoint server: it lists the targets the service
keeps, explains their last decision, shows their history, follows decisions
as they happen, asks what-if questions, puts and explains fleets (one
autoscaler over a workload in several clusters) and backs the store up. It also
issues the certificates of an installation (certs) and, through your
kubeconfig, creates the agent's Autoscaler objects in a cluster.

A target is named CLUSTER/NAMESPACE/NAME: the cluster name its agent was
given, and the namespace and name of its Autoscaler (e.g. dev/shop/web).

Start a development server first (plaintext, no authentication):
  go run ./cmd/setpoint-server -insecure-dev     # or ./bin/setpoint-server -insecure-dev after make build

Exit status: 0 on success, 1 when the command failed, 2 when the command
line is wrong.`

const rootExample = `  # The README's first decision, then what the service keeps
  setpointctl recommend -f testdata/examples/recommend.json
  setpointctl list
  setpointctl explain dev/shop/web

  # A server with TLS and a client certificate
  setpointctl --addr setpoint.example:7443 --ca pki/ca.crt --cert pki/ops.crt --key pki/ops.key list`

// rootCommand builds the command tree of one invocation.
func (c *cli) rootCommand() *cobra.Command {
	var cfg Config
	root := &cobra.Command{
		Use:           programName,
		Short:         "The command line of Setpoint, the HPA's decisions as a service",
		Long:          rootLong,
		Example:       rootExample,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Completion of a file-naming flag lists files.
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.AddGroup(groups...)
	root.SetHelpCommandGroupID("setup")
	root.SetCompletionCommandGroupID("setup")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{msg: err.Error(), cmd: cmd.CommandPath()}
	})
	cfg.RegisterFlags(root.PersistentFlags())
	e := &env{cli: c, cfg: &cfg}
	for _, sub := range []*cobra.Command{
		listCmd(e), getCmd(e), explainCmd(e), historyCmd(e), watchCmd(e),
		simulateCmd(e), recommendCmd(e), deleteCmd(e), backupCmd(e),
		fleetCmd(e),
		autoscaleCmd(e), importHPACmd(e),
		certsCmd(e), storeCmd(e),
	} {
		root.AddCommand(sub)
	}
	return root
}

// env is what a command runs with.
type env struct {
	*cli
	cfg *Config
	// client is set for the commands that call the server.
	client *setpointclient.Client
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
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", setpointclient.DefaultAddr, "the Setpoint server's address (host:port), or several servers' (host:port,host:port,...)")
	fs.StringVar(&c.Token, "token", os.Getenv("SETPOINT_TOKEN"), "bearer token (default $SETPOINT_TOKEN)")
	fs.BoolVar(&c.TLS, "tls", false, "use TLS (implied by --ca, --cert)")
	fs.StringVar(&c.Files.CA, "ca", "", "CA certificate (PEM) verifying the server; default: the system's roots")
	fs.StringVar(&c.Files.Cert, "cert", "", "client certificate (PEM) for mutual TLS")
	fs.StringVar(&c.Files.Key, "key", "", "the client certificate's key (PEM)")
	fs.StringVar(&c.Files.ServerName, "server-name", "", "name to verify in the server's certificate (default: the host of --addr)")
}

// Validate checks the configuration's values.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return errors.New("--addr must name the server (host:port), e.g. --addr 127.0.0.1:7443")
	}
	if (c.Files.Cert == "") != (c.Files.Key == "") {
		return errors.New("--cert and --key go together: give both (mutual TLS) or neither")
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

// serverRun wraps a command that calls the server: it validates the
// connection flags, dials, runs, and rewrites the server's errors in the
// user's terms.
func serverRun(e *env, run func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return localRun(func(cmd *cobra.Command, args []string) error {
		if err := e.cfg.Validate(); err != nil {
			return &usageError{msg: err.Error(), cmd: cmd.CommandPath()}
		}
		c, err := e.cfg.Dial()
		if err != nil {
			return err
		}
		defer c.Close()
		e.client = c
		return e.explain(run(cmd.Context(), args))
	})
}

// localRun wraps a command that does not call the server, marking that it
// ran (errors from then on are failures, not usage errors).
func localRun(run func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if cmd.Annotations == nil {
			cmd.Annotations = map[string]string{}
		}
		cmd.Annotations[ranAnnotation] = "true"
		return run(cmd, args)
	}
}

// longFlagsDoubleDash accepts the single-dash spelling of long flags
// (-addr, -cluster), which setpointctl took before it followed kubectl's
// conventions: "-name" and "-name=value" become "--name…" when name is a
// long flag of some command. Single letters and "--" onwards are left
// alone.
func longFlagsDoubleDash(root *cobra.Command, args []string) []string {
	long := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name := a[1:]
			if j := strings.IndexByte(name, '='); j >= 0 {
				name = name[:j]
			}
			if len(name) > 1 && long[name] {
				out[i] = "-" + a
			}
		}
	}
	return out
}
