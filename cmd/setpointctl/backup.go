package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func backupCmd(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	file := fs.String("o", "", "file to write the snapshot to (replaced only once the snapshot is complete and verified)")
	return func(ctx context.Context, e *env, _ []string) error {
		if *file == "" {
			return errors.New("backup: -o FILE is required")
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
	}
}
