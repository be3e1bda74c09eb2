package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/internal/certs"
	"github.com/spf13/cobra"
)

func certsCmd(e *env) *cobra.Command {
	o := certs.Defaults()
	var dir string
	var force bool
	cmd := &cobra.Command{
		Use:     "certs [--dir DIR] [--cluster NAME]...",
		GroupID: "setup",
		Short:   "Issue the CA, server, agent and platform certificates and the principals file",
		Long: `Issue everything a Setpoint installation authenticates with, into DIR:

  ca.crt, ca.key            the CA that signs the server's and the clients' certificates
  server.crt, server.key    the server's certificate, for every name clients dial
                            (the Service setpoint-server in setpoint-system, localhost)
  agent-CLUSTER.crt, .key   one agent certificate per --cluster, URI SAN
                            spiffe://TRUST-DOMAIN/cluster/CLUSTER
  platform.crt, .key        a platform reading every cluster (dashboards, planners)
  admin.crt, .key           an operator (setpointctl backup, delete)
  principals.yaml           the server's -auth-config, listing each of them with its role

The overlay deploy-local (kind, k3s) reads them from deploy-local/pki, so
the documented install is: setpointctl certs --dir deploy-local/pki, then
kubectl apply --server-side -k deploy-local. In production keep ca.key
offline, or use your own CA or cert-manager (docs/security.md) with the
same identities.`,
		Example: `  # The certificates deploy-local installs
  setpointctl certs --dir deploy-local/pki

  # Two clusters, and the name a load balancer gives the server
  setpointctl certs --dir pki --cluster eu1 --cluster us1 --server-name setpoint.example.com

  # Then, for a server outside Kubernetes
  setpoint-server -tls-cert pki/server.crt -tls-key pki/server.key -tls-client-ca pki/ca.crt -auth-config pki/principals.yaml
  setpointctl --ca pki/ca.crt --cert pki/admin.crt --key pki/admin.key list`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&dir, "dir", "pki", "directory to write the files to (created if missing)")
	fs.StringSliceVar(&o.Clusters, "cluster", o.Clusters, "a cluster whose agent gets a certificate (repeat, or comma-separated); deploy/ runs the agent of cluster \"default\"")
	fs.StringSliceVar(&o.ServerNames, "server-name", nil, "another DNS name or IP address of the server (repeat); the in-cluster Service names and localhost are always included")
	fs.StringVar(&o.TrustDomain, "trust-domain", o.TrustDomain, "the SPIFFE trust domain of the identities")
	fs.DurationVar(&o.Validity, "validity", o.Validity, "how long the server's and clients' certificates stay valid (the CA: ten times as long)")
	fs.BoolVar(&force, "force", false, "overwrite existing files")
	cmd.MarkFlagDirname("dir")
	cmd.RunE = localRun(func(cmd *cobra.Command, _ []string) error {
		if dir == "" {
			return usagef(cmd, "--dir must name a directory, e.g. --dir deploy-local/pki")
		}
		if err := o.Validate(); err != nil {
			return usagef(cmd, "%v", err)
		}
		files, err := certs.Issue(o, time.Now())
		if err != nil {
			return err
		}
		if err := certs.Write(dir, files, force); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote %s to %s\n", strings.Join(certs.Names(files), ", "), dir)
		_, err = fmt.Fprintf(e.stdout, "next: kubectl apply --server-side -k deploy-local (when --dir is deploy-local/pki); docs/security.md says where each file goes otherwise\n")
		return err
	})
	return cmd
}
