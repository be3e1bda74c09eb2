package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/etcdstore"
)

const storeLong = `Copy a Setpoint store between its two backends, a bbolt file and etcd, move
clusters between the stores of two shards, and verify a copy. These
commands open the stores themselves, not through a server, so they take no
--addr.

` + storeTerms

// storeTerms is what every store command's help says.
const storeTerms = `A store is named by its backend and where it lives:
  bolt:PATH                   a bbolt file (bbolt:PATH is accepted too)
  etcd:URL[,URL...]           an etcd cluster's client URLs, with --etcd-prefix
                              (--from-etcd-prefix, --to-etcd-prefix for one
                              side) and, for TLS, --etcd-ca, --etcd-cert,
                              --etcd-key

A bbolt file is used offline: stop the setpoint-server that uses it first
(the file is locked while a server has it open, and the command says so).
It is opened as the server opens it: a file an older version wrote is
first brought up to this version's layout.
For a consistent copy from etcd, stop the servers that write under the
prefix too; a target that changes during the copy fails the verification.

Only targets are copied: each target's record whole (spec, status, its
history of recommendations and scale events, last decision, events). The
change feed (Watch) and the decision log (history --decisions) start anew in
the destination, from each target's last decision. docs/scale-out.md
describes a move step by step, of a store and of one cluster.`

// storeFlags are the flags of the store commands.
type storeFlags struct {
	from, to string
	// fromPrefix and toPrefix, when set, replace --etcd-prefix for --from
	// and for --to.
	fromPrefix, toPrefix string
	// clusters are the clusters to copy, compare or delete (exact names,
	// each once); none means every target.
	clusters []string
	// noVerify lets delete run without --to.
	noVerify bool
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
		Short:   "Copy the store between bbolt and etcd, move clusters between shards, verify (offline)",
		Long:    storeLong,
		Example: `  # Move a server's bbolt file into etcd (stop the server first)
  setpointctl store copy --from bolt:/var/lib/setpoint/setpoint.db --to etcd:https://e1:2379,https://e2:2379,https://e3:2379 \
      --etcd-ca etcd-ca.pem --etcd-cert etcd-client.pem --etcd-key etcd-client-key.pem

  # And back into a new bbolt file
  setpointctl store copy --from etcd:https://e1:2379 --to bolt:/var/lib/setpoint/setpoint.db --etcd-ca etcd-ca.pem ...

  # Move cluster eu-1 from shard 0 to shard 1 (two prefixes of one etcd; stop both shards' servers)
  setpointctl store copy --from etcd:https://e1:2379 --from-etcd-prefix /shard-0/ --to etcd:https://e1:2379 --to-etcd-prefix /shard-1/ --cluster eu-1 ...
  setpointctl store delete --from etcd:https://e1:2379 --from-etcd-prefix /shard-0/ --to etcd:https://e1:2379 --to-etcd-prefix /shard-1/ --cluster eu-1 ...`,
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
	cmd.AddCommand(storeCopyCmd(e, &f), storeVerifyCmd(e, &f), storeDeleteCmd(e, &f))
	return cmd
}

func storeCopyCmd(e *env, f *storeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "copy --from STORE --to STORE [--cluster NAME]...",
		Short: "Copy every target of one store into an empty one, or some clusters' into another shard, then verify",
		Long: `Copy every target of the store --from into the store --to, then read every
target back from both and compare them. --to must hold no target: a new
bbolt file (written under a temporary name and renamed once verified), or
an etcd prefix no server uses yet.

With --cluster, copy only the targets of the named clusters (exact names,
no wildcard; repeat the flag or separate names with commas): this moves
clusters between the stores of two shards. --to may then hold other
clusters' targets but none of the named clusters' (the command refuses,
saying which and how many, and writes nothing). An existing bbolt file is
written in place, offline like the source; a new one under a temporary
name, as without --cluster. A copy that fails or does not verify leaves
in --to the targets it wrote, and only those (--to held none of these
clusters' targets before); the error says so. Delete them with
  setpointctl store delete --from TO --cluster NAME --no-verify
before copying again. Once the copy is verified, finish the move with
store delete --from FROM --to TO --cluster NAME.

` + storeTerms,
		Example: `  setpointctl store copy --from bolt:/var/lib/setpoint/setpoint.db --to etcd:https://e1:2379,https://e2:2379,https://e3:2379 --etcd-ca ca.pem --etcd-cert client.pem --etcd-key client-key.pem

  # One cluster of a bbolt shard into another bbolt shard (both servers stopped)
  setpointctl store copy --from bolt:/srv/shard-0/setpoint.db --to bolt:/srv/shard-1/setpoint.db --cluster eu-1`,
		Args: noArgs,
	}
	withLocations(cmd, f, "copy", e.storeCopy)
	return cmd
}

func storeVerifyCmd(e *env, f *storeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify --from STORE --to STORE [--cluster NAME]...",
		Short: "Compare every target of two stores, or some clusters' (after a copy)",
		Long: `Read every target of the store --from and of the store --to and compare
them: each target of --from must be in --to, equal, and --to must hold no
other target. With --cluster, compare only the targets of the named
clusters: --to must hold no other target of those clusters. It lists what
differs and exits 1 when anything does.

` + storeTerms,
		Example: `  setpointctl store verify --from bolt:/var/lib/setpoint/setpoint.db --to etcd:https://e1:2379 --etcd-ca ca.pem --etcd-cert client.pem --etcd-key client-key.pem`,
		Args:    noArgs,
	}
	withLocations(cmd, f, "compare", e.storeVerify)
	return cmd
}

func storeDeleteCmd(e *env, f *storeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete --from STORE --cluster NAME... (--to STORE | --no-verify)",
		Short: "Delete some clusters' targets from a store (the end of a move between shards)",
		Long: `Delete every target of the named clusters from the store --from, with
their decision logs, and print how many it deleted. It ends a move between
shards: after store copy --cluster has copied the clusters into the new
shard's store, delete them from the old one, so that each cluster lives in
one shard. --cluster is required (exact names, no wildcard; repeat the flag
or separate names with commas).

With --to STORE (the store the clusters were copied to), it first compares
the clusters' targets in both stores, as store verify --cluster does, and
deletes nothing unless they are equal. --no-verify deletes without
comparing: to remove what a failed store copy --cluster left in its
destination (which held none of those targets before). One of the two is
required.

A deletion that stops midway leaves the targets deleted so far deleted;
running it again with --no-verify deletes the rest.

` + storeTerms,
		Example: `  setpointctl store delete --from bolt:/srv/shard-0/setpoint.db --to bolt:/srv/shard-1/setpoint.db --cluster eu-1`,
		Args:    noArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&f.from, "from", "", "the store to delete from: bolt:PATH or etcd:URL[,URL...]")
	fs.StringVar(&f.to, "to", "", "the store the clusters were copied to, compared first: bolt:PATH or etcd:URL[,URL...]")
	fs.BoolVar(&f.noVerify, "no-verify", false, "delete without comparing with --to (to clean up after a failed copy)")
	prefixAndClusterFlags(cmd, f, "delete")
	cmd.RunE = localRun(func(cmd *cobra.Command, _ []string) error {
		if len(f.clusters) == 0 {
			return usagef(cmd, "--cluster is required: name each cluster to delete (exact names, no wildcard), e.g. %s", exampleOf(cmd))
		}
		switch {
		case f.to == "" && !f.noVerify:
			return usagef(cmd, "give --to STORE, the store the clusters were copied to (nothing is deleted unless they are equal there), or --no-verify to delete without comparing (after a failed copy)")
		case f.to != "" && f.noVerify:
			return usagef(cmd, "--to and --no-verify exclude each other: --to compares before deleting, --no-verify does not")
		}
		from, to, err := f.parse(cmd, f.to != "")
		if err != nil {
			return err
		}
		return e.storeDelete(cmd.Context(), f, from, to)
	})
	return cmd
}

// withLocations registers --from, --to and --cluster on cmd, which does
// what (copy, compare) with clusters, and makes it run run with the stores
// they name.
func withLocations(cmd *cobra.Command, f *storeFlags, what string, run func(ctx context.Context, f *storeFlags, from, to location) error) {
	cmd.Flags().StringVar(&f.from, "from", "", "the store to read: bolt:PATH or etcd:URL[,URL...]")
	cmd.Flags().StringVar(&f.to, "to", "", "the store to write (copy) or compare with (verify): bolt:PATH or etcd:URL[,URL...]")
	prefixAndClusterFlags(cmd, f, what)
	cmd.RunE = localRun(func(cmd *cobra.Command, _ []string) error {
		from, to, err := f.parse(cmd, true)
		if err != nil {
			return err
		}
		return run(cmd.Context(), f, from, *to)
	})
}

// prefixAndClusterFlags registers --from-etcd-prefix, --to-etcd-prefix
// and --cluster on cmd, which does what with the clusters.
func prefixAndClusterFlags(cmd *cobra.Command, f *storeFlags, what string) {
	fs := cmd.Flags()
	fs.StringVar(&f.fromPrefix, "from-etcd-prefix", "", "key prefix of --from in etcd (default: --etcd-prefix)")
	fs.StringVar(&f.toPrefix, "to-etcd-prefix", "", "key prefix of --to in etcd (default: --etcd-prefix)")
	fs.StringSliceVar(&f.clusters, "cluster", nil, "a cluster whose targets to "+what+" (exact name; repeat, or comma-separated)")
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
	if err := holdsClusters(ctx, src, f.clusters, "compare"); err != nil {
		return err
	}
	return e.verified(ctx, src, dst, f.clusters)
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

// flag is l as --from or --to and the flags it needs (--etcd-prefix; the
// TLS flags are the user's to add).
func (l location) flag() string {
	if l.kind == "bolt" {
		return "bolt:" + l.path
	}
	return "etcd:" + strings.Join(l.endpoints, ",") + " --etcd-prefix " + l.prefix
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

// parse checks the command line's locations, clusters and etcd flags;
// to is nil when --to is optional (withTo false) and not given.
func (f *storeFlags) parse(cmd *cobra.Command, withTo bool) (from location, to *location, err error) {
	if from, err = parseLocation("from", f.from, cmp.Or(f.fromPrefix, f.etcd.prefix)); err != nil {
		return from, nil, usagef(cmd, "%v, e.g. %s", err, exampleOf(cmd))
	}
	if withTo {
		l, err := parseLocation("to", f.to, cmp.Or(f.toPrefix, f.etcd.prefix))
		if err != nil {
			return from, nil, usagef(cmd, "%v, e.g. %s", err, exampleOf(cmd))
		}
		to = &l
	}
	if (f.etcd.cert == "") != (f.etcd.key == "") {
		return from, to, usagef(cmd, "--etcd-cert and --etcd-key go together: give both (mutual TLS) or neither")
	}
	if f.etcd.dialTimeout <= 0 {
		return from, to, usagef(cmd, "--etcd-dial-timeout must be positive")
	}
	if to != nil && from.String() == to.String() {
		return from, to, usagef(cmd, "--from and --to name the same store (%s)", from)
	}
	var clusters []string
	for _, c := range f.clusters {
		if c = strings.TrimSpace(c); c == "" {
			return from, to, usagef(cmd, "--cluster %q: a cluster name must not be empty", strings.Join(f.clusters, ","))
		}
		if !slices.Contains(clusters, c) {
			clusters = append(clusters, c)
		}
	}
	f.clusters = clusters
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
		b, err := boltstore.Open(l.path, boltstore.Options{})
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

// storeCopy copies from into to and verifies the copy: every target into
// an empty store, or the targets of f.clusters into a store that holds
// none of theirs. A new bbolt file is written under a temporary name and
// renamed into place only once verified; an existing one (with --cluster)
// is written in place.
func (e *env) storeCopy(ctx context.Context, f *storeFlags, from, to location) error {
	src, err := openLocation(ctx, from, f.etcd, false)
	if err != nil {
		return err
	}
	defer src.close()
	if len(f.clusters) > 0 {
		if err := holdsClusters(ctx, src, f.clusters, "copy"); err != nil {
			return err
		}
	} else if n, _, err := src.Count(ctx); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	} else if n == 0 {
		return fmt.Errorf("%s holds no target: nothing to copy (is it the store the servers use? with etcd, --etcd-prefix must be their -etcd-prefix)", from)
	}
	final, renamed := to, false
	if to.kind == "bolt" {
		if _, err := os.Stat(to.path); err == nil && len(f.clusters) == 0 {
			return fmt.Errorf("%s exists: copy into a new file (nothing is overwritten), or name the clusters to move into it with --cluster", to)
		} else if err != nil {
			tmp, err := os.CreateTemp(filepath.Dir(to.path), "."+filepath.Base(to.path)+".*")
			if err != nil {
				return err
			}
			tmp.Close() // bbolt lays out an empty file when it opens it
			to.path, renamed = tmp.Name(), true
			defer os.Remove(to.path) // no-op after the rename
		}
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
	n, err := store.Copy(ctx, dst, src, store.CopyOptions{Clusters: f.clusters})
	var occ *store.OccupiedError
	if errors.As(err, &occ) {
		return occupied(final, occ, f.clusters)
	}
	left := leftBehind(final, f.clusters, renamed)
	if err != nil && left == "" {
		return fmt.Errorf("copy stopped after %s, nothing was written to %s: %w", targets(n), final, err)
	}
	if err != nil {
		return fmt.Errorf("copy stopped after %s: %w\n%s", targets(n), err, left)
	}
	fmt.Fprintf(e.stdout, "copied %s%s from %s to %s\n", targets(n), ofClusters(f.clusters), from, final)
	dst.where = final
	if err := e.verified(ctx, src, dst, f.clusters); err != nil {
		if left != "" {
			return fmt.Errorf("%w\n%s", err, left)
		}
		return err
	}
	if renamed {
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

// occupied explains Copy's refusal of the destination to.
func occupied(to location, occ *store.OccupiedError, clusters []string) error {
	if occ.Clusters == nil {
		return fmt.Errorf("%s already holds %s: copy into an empty store (a new --etcd-prefix, or delete the keys under this one with etcdctl del --prefix), or name the clusters to move into it with --cluster", to, targets(occ.Targets))
	}
	var held, names []string
	for _, c := range clusters {
		if n := occ.Clusters[c]; n > 0 {
			held = append(held, fmt.Sprintf("%s of cluster %q", targets(n), c))
			names = append(names, c)
		}
	}
	return fmt.Errorf("%s already holds %s; nothing was copied. A cluster moves into a store that holds none of its targets. "+
		"If a failed copy left them, delete them there (setpointctl store delete --from %s --cluster %s --no-verify) and copy again; "+
		"if a server serves them there, that cluster already lives in that store", to, strings.Join(held, ", "), to.flag(), strings.Join(names, ","))
}

// leftBehind says what a failed copy into to leaves there and how to
// remove it; "" when it leaves nothing (a new bbolt file, renamed only
// once verified).
func leftBehind(to location, clusters []string, renamed bool) string {
	switch {
	case renamed:
		return ""
	case len(clusters) == 0:
		return fmt.Sprintf("The targets written stay under %s; delete them (etcdctl del --prefix %s) before copying again", to, to.prefix)
	}
	return fmt.Sprintf("The targets%s written stay in %s, and only those: it held none of them before. "+
		"Delete them (setpointctl store delete --from %s --cluster %s --no-verify) before copying again", ofClusters(clusters), to, to.flag(), strings.Join(clusters, ","))
}

// holdsClusters fails unless s holds a target of each of clusters; what
// is what the command would do with them.
func holdsClusters(ctx context.Context, s *opened, clusters []string, what string) error {
	var missing []string
	for _, c := range clusters {
		page, next, err := s.List(ctx, store.Query{Cluster: c, PageSize: 1})
		if err != nil && !errors.Is(err, store.ErrCorrupt) {
			return fmt.Errorf("%s: %w", s.where, err)
		}
		if len(page) == 0 && next == "" && err == nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	hint := "cluster names are exact, there is no wildcard"
	if s.where.kind == "etcd" {
		hint += "; is " + s.where.prefix + " the prefix its servers use?"
	}
	return fmt.Errorf("%s holds no target%s: nothing to %s (%s)", s.where, ofClusters(missing), what, hint)
}

// ofClusters names clusters after a count of targets: ` of cluster "a"`,
// ` of clusters "a", "b"`; "" for none (every target).
func ofClusters(clusters []string) string {
	q := make([]string, len(clusters))
	for i, c := range clusters {
		q[i] = strconv.Quote(c)
	}
	switch len(q) {
	case 0:
		return ""
	case 1:
		return " of cluster " + q[0]
	}
	return " of clusters " + strings.Join(q, ", ")
}

// storeDelete deletes the targets of f.clusters from from, after
// comparing them with to's when to is not nil.
func (e *env) storeDelete(ctx context.Context, f *storeFlags, from location, to *location) error {
	src, err := openLocation(ctx, from, f.etcd, false)
	if err != nil {
		return err
	}
	defer src.close()
	if err := holdsClusters(ctx, src, f.clusters, "delete"); err != nil {
		return err
	}
	again := "run this again to delete the rest"
	if to != nil {
		dst, err := openLocation(ctx, *to, f.etcd, false)
		if err != nil {
			return err
		}
		err = e.verified(ctx, src, dst, f.clusters)
		dst.close()
		if err != nil {
			return fmt.Errorf("%w\nNothing was deleted from %s", err, from)
		}
		again = "they were verified equal in " + to.String() + " before the first deletion: run this again with --no-verify instead of --to to delete the rest"
	}
	n, err := store.DeleteClusters(ctx, src, f.clusters)
	if err != nil {
		return fmt.Errorf("delete stopped after %s: %w\nThose stay deleted; %s", targets(n), err, again)
	}
	_, err = fmt.Fprintf(e.stdout, "deleted %s%s from %s\n", targets(n), ofClusters(f.clusters), from)
	return err
}

// verified compares src and dst target by target (only the targets of
// clusters, when any are named), prints the outcome, and fails when they
// differ.
func (e *env) verified(ctx context.Context, src, dst *opened, clusters []string) error {
	r, err := compareStores(ctx, src, dst, clusters)
	if err != nil {
		return err
	}
	if r.ok() {
		in := " in "
		if len(clusters) == 0 {
			in = " of "
		}
		_, err := fmt.Fprintf(e.stdout, "verified: all %s%s%s%s read back equal from %s\n", targets(r.compared), ofClusters(clusters), in, src.where, dst.where)
		return err
	}
	r.print(e.stdout, src.where, dst.where)
	return fmt.Errorf("verification failed: %s and %s differ%s (%s)", src.where, dst.where, inClusters(clusters), r.summary())
}

// inClusters names clusters after a verb: ` in cluster "a"`; "" for none.
func inClusters(clusters []string) string {
	if len(clusters) == 0 {
		return ""
	}
	return " in" + strings.TrimPrefix(ofClusters(clusters), " of")
}

// targets counts n targets in words.
func targets(n int) string {
	if n == 1 {
		return "1 target"
	}
	return fmt.Sprintf("%d targets", n)
}
