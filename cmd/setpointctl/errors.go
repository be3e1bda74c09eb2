package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// usageError is a wrong command line: setpointctl exits 2 and points at
// the command's help.
type usageError struct {
	msg string
	// cmd is the command whose help to show ("setpointctl get").
	cmd string
}

func (u *usageError) Error() string { return u.msg }

// usagef is a usage error of cmd.
func usagef(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), cmd: cmd.CommandPath()}
}

// hintError is an error with what to do next; it wraps the original so
// status.Code and FieldViolations still read it.
type hintError struct {
	msg string
	err error
}

func (h *hintError) Error() string { return h.msg }
func (h *hintError) Unwrap() error { return h.err }

// devServerCommand starts a development server from a clone.
const devServerCommand = "go run ./cmd/setpoint-server -insecure-dev   (or ./bin/setpoint-server -insecure-dev after make build)"

// explain rewrites an error of a command that called the server in the
// user's terms: which address or target, and what to do next.
func (e *env) explain(err error) error {
	if err == nil {
		return nil
	}
	addr := e.cfg.Addr
	switch {
	case errors.Is(err, setpointclient.ErrBadKey):
		return &usageError{msg: err.Error()}
	case errors.Is(err, setpointclient.ErrUnreachable):
		return &hintError{fmt.Sprintf("%s\nStart a development server in another terminal:\n  %s\nor point setpointctl at yours with --addr HOST:PORT", err, devServerCommand), err}
	case errors.Is(err, setpointclient.ErrTLSMismatch):
		return &hintError{fmt.Sprintf("%s.\nA server with TLS needs --ca FILE (the CA that signed its certificate; --cert/--key for mutual TLS); a development server (-insecure-dev) takes neither", err), err}
	case errors.Is(err, setpointclient.ErrTargetNotFound):
		return &hintError{fmt.Sprintf("%s.\n'setpointctl list' shows the targets the server at %s keeps", err, addr), err}
	case errors.Is(err, setpointclient.ErrFleetNotFound):
		return &hintError{fmt.Sprintf("%s.\n'setpointctl fleet list' shows the fleets the server at %s keeps that you may read", err, addr), err}
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Unauthenticated:
		return &hintError{fmt.Sprintf("the server at %s did not accept who you are: %s.\nGive a client certificate (--cert FILE --key FILE) or a bearer token (--token, or $SETPOINT_TOKEN) listed in its principals file (docs/security.md)", addr, st.Message()), err}
	case codes.PermissionDenied:
		return &hintError{fmt.Sprintf("the server at %s refused: %s.\nYour identity's role does not allow this call; an admin can change it in the principals file (docs/security.md)", addr, st.Message()), err}
	case codes.DeadlineExceeded:
		return &hintError{fmt.Sprintf("the server at %s did not answer in time (%s); try again, or check its log", addr, st.Message()), err}
	case codes.InvalidArgument:
		return &hintError{"the server rejected the request: " + st.Message(), err}
	case codes.Unavailable:
		return &hintError{fmt.Sprintf("the server at %s is unavailable: %s; try again in a moment", addr, st.Message()), err}
	}
	return &hintError{fmt.Sprintf("the server at %s answered %s: %s", addr, st.Code(), st.Message()), err}
}

// printViolations lists the invalid fields an INVALID_ARGUMENT names, in
// field order.
func printViolations(w io.Writer, err error) {
	v := setpointclient.FieldViolations(err)
	for _, f := range slices.Sorted(maps.Keys(v)) {
		fmt.Fprintf(w, "  %s: %s\n", f, v[f])
	}
}

// exactArgs accepts exactly n positional arguments, named in the usage
// error (e.g. "CLUSTER/NAMESPACE/NAME").
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			return usagef(cmd, "%s needs %s, e.g. %s", cmd.CommandPath(), what, exampleOf(cmd))
		case len(args) > n:
			return usagef(cmd, "%s takes %s, got %d arguments: %q", cmd.CommandPath(), what, len(args), args)
		}
		return nil
	}
}

// noArgs accepts no positional argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef(cmd, "%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

// exampleOf is the first example line of cmd.
func exampleOf(cmd *cobra.Command) string {
	for l := range strings.Lines(cmd.Example) {
		if l = strings.TrimSpace(l); l != "" && l[0] != '#' {
			return "'" + l + "'"
		}
	}
	return cmd.UseLine()
}
