// Command setpointctl talks to a Setpoint server.
//
//	setpointctl [flags] recommend -f request.json   # a protojson RecommendRequest; prints the decision
//	setpointctl [flags] get CLUSTER/NAMESPACE/NAME
//	setpointctl [flags] list [-cluster C] [-namespace N]
//	setpointctl [flags] delete CLUSTER/NAMESPACE/NAME
//
// Flags: -addr (default 127.0.0.1:7443), -token (default $SETPOINT_TOKEN),
// -tls, -ca, -cert, -key, -server-name. Output is protojson.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "setpointctl:", err)
		os.Exit(1)
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

const usage = `usage: setpointctl [flags] COMMAND
commands:
  recommend -f FILE                 send a RecommendRequest (protojson; "-" reads stdin)
  get CLUSTER/NAMESPACE/NAME        show a target
  list [-cluster C] [-namespace N]  list targets
  delete CLUSTER/NAMESPACE/NAME     forget a target`

// run executes one command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := flag.NewFlagSet("setpointctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage); fs.PrintDefaults() }
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
	opts := setpointclient.Options{Token: cfg.Token}
	if cfg.TLS || cfg.Files.CA != "" || cfg.Files.Cert != "" {
		tc, err := cfg.Files.Config()
		if err != nil {
			return err
		}
		opts.TLS = tc
	}
	c, err := setpointclient.Dial(cfg.Addr, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := command(ctx, c, fs.Arg(0), fs.Args()[1:], stderr)
	if err != nil {
		return err
	}
	out, err := protojson.MarshalOptions{Multiline: true}.Marshal(resp)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, string(out))
	return err
}

// command runs one command and returns the response to print.
func command(ctx context.Context, c *setpointclient.Client, name string, args []string, stderr io.Writer) (proto.Message, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch name {
	case "recommend":
		file := fs.String("f", "", "RecommendRequest in protojson; - reads stdin")
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		req, err := ReadRequest(*file)
		if err != nil {
			return nil, err
		}
		return c.Recommend(ctx, req)
	case "get", "delete":
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		key, err := parseKey(fs.Arg(0))
		if err != nil {
			return nil, err
		}
		if name == "get" {
			return c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key})
		}
		return c.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: key})
	case "list":
		req := &setpointv1.ListTargetsRequest{}
		fs.StringVar(&req.Cluster, "cluster", "", "only this cluster")
		fs.StringVar(&req.Namespace, "namespace", "", "only this namespace (requires -cluster)")
		fs.StringVar(&req.PageToken, "page-token", "", "continue a previous list")
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return c.ListTargets(ctx, req)
	default:
		return nil, fmt.Errorf("unknown command %q\n%s", name, usage)
	}
}

// ReadRequest reads a protojson RecommendRequest from path ("-": stdin).
func ReadRequest(path string) (*setpointv1.RecommendRequest, error) {
	var (
		b   []byte
		err error
	)
	switch path {
	case "":
		return nil, errors.New("recommend: -f FILE is required")
	case "-":
		b, err = io.ReadAll(os.Stdin)
	default:
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	req := &setpointv1.RecommendRequest{}
	if err := protojson.Unmarshal(b, req); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return req, nil
}

// parseKey parses CLUSTER/NAMESPACE/NAME.
func parseKey(s string) (*setpointv1.TargetKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("want CLUSTER/NAMESPACE/NAME, got %q", s)
	}
	return &setpointv1.TargetKey{Cluster: parts[0], Namespace: parts[1], Name: parts[2]}, nil
}
