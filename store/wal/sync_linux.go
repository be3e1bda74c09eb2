package wal

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable, and its size, without its other
// metadata.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
