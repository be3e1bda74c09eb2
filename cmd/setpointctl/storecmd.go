package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/etcdstore"
)

const storeLong = `Copy a Setpoint store between its two backends, a bbolt file and etcd, and
verify a copy. These commands open the stores themselves, not through a
server, so they take no --addr.

` + storeTerms

// storeTerms is what every store command's help says.
const storeTerms = `A store is named by its backend and where it lives:
  bolt:PATH                   a bbolt file (bbolt:PATH is accepted too)
  etcd:URL[,URL...]           an etcd cluster's client URLs, with --etcd-prefix
                              and, for TLS, --etcd-ca, --etcd-cert, --etcd-key

A bbolt file is copied offline: stop the setpoint-server that uses it first
(the file is locked while a server has it open, and the command says so).
It is opened as the server opens it: a file an older version wrote is
first brought up to this version's layout.
For a consistent copy from etcd, stop the servers that write under the
prefix too; a target that changes during the copy fails the verification.

Only targets are copied: each target's record whole (spec, status, its
history of recommendations and scale events, last decision, events). The
change feed (Watch) and the decision log (history --decisions) start anew in
the destination, from each target's last decision. docs/scale-out.md
describes a move step by step.`

// storeFlags are the flags of the store commands.
type storeFlags struct {
	from, to string
	// etcd is how an etcd location is reached.
	etcd etcdFlags
}

// etcdFlags say how to reach an etcd location.
type etcdFlags struct {
	prefix, cert, key, ca string
	dialTimeout           time.Duration
}

func storeCmd(e *env) *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:     "store",
		GroupID: "setup",
		Short:   "Copy the store between bbolt and etcd, and verify the copy (offline)",
		Long:    storeLong,
		Example: `  # Move a server's bbolt file into etcd (stop the server first)
  setpointctl store copy --from bolt:/var/lib/setpoint/setpoint.db --to etcd:https://e1:2379,https://e2:2379,https://e3:2379 \
      --etcd-ca etcd-ca.pem --etcd-cert etcd-client.pem --etcd-key etcd-client-key.pem

  # And back into a new bbolt file
  setpointctl store copy --from etcd:https://e1:2379 --to bolt:/var/lib/setpoint/setpoint.db --etcd-ca etcd-ca.pem ...`,
		Args: noArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.etcd.prefix, "etcd-prefix", etcdstore.DefaultPrefix, "key prefix of the store in etcd (setpoint-server's -etcd-prefix)")
	pf.StringVar(&f.etcd.ca, "etcd-ca", "", "CA bundle (PEM) verifying etcd's certificate")
	pf.StringVar(&f.etcd.cert, "etcd-cert", "", "etcd client certificate (PEM)")
	pf.StringVar(&f.etcd.key, "etcd-key", "", "the etcd client certificate's key (PEM)")
	pf.DurationVar(&f.etcd.dialTimeout, "etcd-dial-timeout", 10*time.Second, "how long to wait for etcd to answer")
	for _, n := range []string{"etcd-ca", "etcd-cert", "etcd-key"} {
		cmd.MarkPersistentFlagFilename(n)
	}
	cmd.AddCommand(storeCopyCmd(e, &f), storeVerifyCmd(e, &f))
	return cmd
}

func storeCopyCmd(e *env, f *storeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "copy --from STORE --to STORE",
		Short: "Copy every target of one store into an empty one, then verify the copy",
		Long: `Copy every target of the store --from into the store --to, then read every
target back from both and compare them. --to must hold no target: a new
bbolt file (written under a temporary name and renamed once verified), or
an etcd prefix no server uses yet.

` + storeTerms,
		Example: `  setpointctl store copy --from bolt:/var/lib/setpoint/setpoint.db --to etcd:https://e1:2379,https://e2:2379,https://e3:2379 --etcd-ca ca.pem --etcd-cert client.pem --etcd-key client-key.pem`,
		Args:    noArgs,
	}
	withLocations(cmd, f, e.storeCopy)
	return cmd
}

func storeVerifyCmd(e *env, f *storeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify --from STORE --to STORE",
		Short: "Compare every target of two stores (after a copy)",
		Long: `Read every target of the store --from and of the store --to and compare
them: each target of --from must be in --to, equal, and --to must hold no
other target. It lists what differs and exits 1 when anything does.

` + storeTerms,
		Example: `  setpointctl store verify --from bolt:/var/lib/setpoint/setpoint.db --to etcd:https://e1:2379 --etcd-ca ca.pem --etcd-cert client.pem --etcd-key client-key.pem`,
		Args:    noArgs,
	}
	withLocations(cmd, f, e.storeVerify)
	return cmd
}

// withLocations registers --from and --to on cmd and makes it run run
// with the stores they name.
func withLocations(cmd *cobra.Command, f *storeFlags, run func(ctx context.Context, f *storeFlags, from, to location) error) {
	cmd.Flags().StringVar(&f.from, "from", "", "the store to read: bolt:PATH or etcd:URL[,URL...]")
	cmd.Flags().StringVar(&f.to, "to", "", "the store to write (copy) or compare with (verify): bolt:PATH or etcd:URL[,URL...]")
	cmd.RunE = localRun(func(cmd *cobra.Command, _ []string) error {
		from, to, err := f.parse(cmd)
		if err != nil {
			return err
		}
		return run(cmd.Context(), f, from, to)
	})
}

// storeVerify compares the stores from and to.
func (e *env) storeVerify(ctx context.Context, f *storeFlags, from, to location) error {
	src, err := openLocation(ctx, from, f.etcd, false)
	if err != nil {
		return err
	}
	defer src.close()
	dst, err := openLocation(ctx, to, f.etcd, false)
	if err != nil {
		return err
	}
	defer dst.close()
	return e.verified(ctx, src, dst)
}

// location is where a store lives.
type location struct {
	// kind is "bolt" or "etcd".
	kind string
	// path is the bbolt file.
	path string
	// endpoints are etcd's client URLs.
	endpoints []string
	// prefix is the store's key prefix in etcd.
	prefix string
}

// String names the location as the user wrote it (with the prefix for etcd).
func (l location) String() string {
	if l.kind == "bolt" {
		return "bolt:" + l.path
	}
	return "etcd:" + strings.Join(l.endpoints, ",") + " (prefix " + l.prefix + ")"
}

// parseLocation parses bolt:PATH or etcd:URL[,URL...].
func parseLocation(flag, s, prefix string) (location, error) {
	kind, rest, ok := strings.Cut(s, ":")
	switch {
	case s == "":
		return location{}, fmt.Errorf("--%s is required: bolt:PATH (a bbolt file) or etcd:URL[,URL...] (an etcd cluster)", flag)
	case ok && (kind == "bolt" || kind == "bbolt") && rest != "":
		return location{kind: "bolt", path: rest}, nil
	case ok && kind == "etcd" && rest != "":
		var eps []string
		for ep := range strings.SplitSeq(rest, ",") {
			if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
				return location{}, fmt.Errorf("--%s %s: %q is not an etcd client URL (http://HOST:PORT or https://HOST:PORT)", flag, s, ep)
			}
			eps = append(eps, ep)
		}
		if prefix == "" {
			return location{}, errors.New("--etcd-prefix must not be empty")
		}
		return location{kind: "etcd", endpoints: eps, prefix: prefix}, nil
	}
	return location{}, fmt.Errorf("--%s %q names no store: write bolt:PATH (a bbolt file) or etcd:URL[,URL...] (an etcd cluster)", flag, s)
}

// parse checks the command line's locations and etcd flags.
func (f *storeFlags) parse(cmd *cobra.Command) (from, to location, err error) {
	if from, err = parseLocation("from", f.from, f.etcd.prefix); err != nil {
		return from, to, usagef(cmd, "%v, e.g. %s", err, exampleOf(cmd))
	}
	if to, err = parseLocation("to", f.to, f.etcd.prefix); err != nil {
		return from, to, usagef(cmd, "%v, e.g. %s", err, exampleOf(cmd))
	}
	if (f.etcd.cert == "") != (f.etcd.key == "") {
		return from, to, usagef(cmd, "--etcd-cert and --etcd-key go together: give both (mutual TLS) or neither")
	}
	if f.etcd.dialTimeout <= 0 {
		return from, to, usagef(cmd, "--etcd-dial-timeout must be positive")
	}
	if from.String() == to.String() {
		return from, to, usagef(cmd, "--from and --to name the same store (%s)", from)
	}
	return from, to, nil
}

// opened is an open store and how to release it.
type opened struct {
	store.Store
	where location
	close func() error
}

// openLocation opens the store at l. A bbolt file must exist unless create
// is set; one a process holds is refused, saying copying is offline.
func openLocation(ctx context.Context, l location, ef etcdFlags, create bool) (*opened, error) {
	if l.kind == "bolt" {
		if !create {
			if _, err := os.Stat(l.path); err != nil {
				return nil, fmt.Errorf("%s: %w", l, err)
			}
		}
		b, err := store.Open(l.path, store.Options{})
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%s is in use: a setpoint-server (or another setpointctl) has it open. Copying a bbolt store is offline: stop that server first, then run this again", l)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l, err)
		}
		return &opened{Store: b, where: l, close: b.Close}, nil
	}
	var tc *tls.Config
	if ef.cert != "" || ef.ca != "" {
		info := transport.TLSInfo{CertFile: ef.cert, KeyFile: ef.key, TrustedCAFile: ef.ca}
		var err error
		if tc, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd TLS: %w", err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: l.endpoints, TLS: tc, DialTimeout: ef.dialTimeout, Context: ctx, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l, err)
	}
	nctx, cancel := context.WithTimeout(ctx, ef.dialTimeout)
	defer cancel()
	s, err := etcdstore.New(nctx, cli, etcdstore.Options{Prefix: l.prefix})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("%s did not answer within --etcd-dial-timeout %s: %w", l, ef.dialTimeout, err)
	}
	return &opened{Store: s, where: l, close: func() error { return errors.Join(s.Close(), cli.Close()) }}, nil
}

// storeCopy copies from into the empty store to and verifies the copy. A
// bbolt destination is written under a temporary name and renamed into
// place only once verified.
func (e *env) storeCopy(ctx context.Context, f *storeFlags, from, to location) error {
	src, err := openLocation(ctx, from, f.etcd, false)
	if err != nil {
		return err
	}
	defer src.close()
	if n, _, err := src.Count(ctx); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	} else if n == 0 {
		return fmt.Errorf("%s holds no target: nothing to copy (is it the store the servers use? with etcd, --etcd-prefix must be their -etcd-prefix)", from)
	}
	final := to
	if to.kind == "bolt" {
		if _, err := os.Stat(to.path); err == nil {
			return fmt.Errorf("%s exists: copy into a new file (nothing is overwritten)", to)
		}
		tmp, err := os.CreateTemp(filepath.Dir(to.path), "."+filepath.Base(to.path)+".*")
		if err != nil {
			return err
		}
		tmp.Close() // bbolt lays out an empty file when it opens it
		to.path = tmp.Name()
		defer os.Remove(to.path) // no-op after the rename
	}
	dst, err := openLocation(ctx, to, f.etcd, true)
	if err != nil {
		return err
	}
	defer func() {
		if dst != nil {
			dst.close()
		}
	}()
	if n, _, err := dst.Count(ctx); err != nil {
		return fmt.Errorf("%s: %w", final, err)
	} else if n > 0 {
		return fmt.Errorf("%s already holds %s: copy into an empty store (a new --etcd-prefix, or delete the keys under this one with etcdctl del --prefix)", final, targets(n))
	}
	n, err := store.Copy(ctx, dst, src)
	if err != nil {
		if final.kind == "etcd" {
			return fmt.Errorf("copy stopped after %s: %w\nThe targets written so far stay under %s; delete them (etcdctl del --prefix %s) before copying again", targets(n), err, final, final.prefix)
		}
		return fmt.Errorf("copy stopped after %s, nothing was written to %s: %w", targets(n), final, err)
	}
	fmt.Fprintf(e.stdout, "copied %s from %s to %s\n", targets(n), from, final)
	dst.where = final
	if err := e.verified(ctx, src, dst); err != nil {
		if final.kind == "etcd" {
			return fmt.Errorf("%w\nThe copy stays under %s; delete it (etcdctl del --prefix %s) before copying again", err, final, final.prefix)
		}
		return err
	}
	if final.kind == "bolt" {
		err := dst.close()
		dst = nil
		if err != nil {
			return err
		}
		if err := os.Rename(to.path, final.path); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote %s\n", final.path)
	}
	return nil
}

// verified compares src and dst target by target, prints the outcome, and
// fails when they differ.
func (e *env) verified(ctx context.Context, src, dst *opened) error {
	r, err := compareStores(ctx, src, dst)
	if err != nil {
		return err
	}
	if r.ok() {
		_, err := fmt.Fprintf(e.stdout, "verified: all %s of %s read back equal from %s\n", targets(r.compared), src.where, dst.where)
		return err
	}
	r.print(e.stdout, src.where, dst.where)
	return fmt.Errorf("verification failed: %s and %s differ (%s)", src.where, dst.where, r.summary())
}

// targets counts n targets in words.
func targets(n int) string {
	if n == 1 {
		return "1 target"
	}
	return fmt.Sprintf("%d targets", n)
}
