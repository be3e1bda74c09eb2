package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

func backupCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "backup -o FILE",
		GroupID: "ask",
		Short:   "Copy a consistent snapshot of the store to a file (admins)",
		Long: `Copy a consistent snapshot of the server's store to FILE while it keeps
serving. FILE is replaced only once the snapshot is complete and its
SHA-256 verified. Needs an admin identity (docs/security.md); restoring is
described in docs/reliability.md.`,
		Example: `  setpointctl backup -o setpoint-backup.db`,
		Args:    noArgs,
	}
	file := cmd.Flags().StringP("output", "o", "", "file to write the snapshot to")
	cmd.MarkFlagFilename("output")
	cmd.RunE = serverRun(e, func(ctx context.Context, _ []string) error {
		if *file == "" {
			return usagef(cmd, "backup needs -o FILE, the file to write the snapshot to, e.g. %s", exampleOf(cmd))
		}
		tmp, err := os.CreateTemp(filepath.Dir(*file), "."+filepath.Base(*file)+".*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name()) // no-op after the rename
		n, err := e.client.Backup(ctx, tmp)
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		if err := os.Rename(tmp.Name(), *file); err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "wrote %s (%d bytes, SHA-256 verified)\n", *file, n)
		return err
	})
	return cmd
}
