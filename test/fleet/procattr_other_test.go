//go:build !linux

package fleet

import "syscall"

// procAttr is empty where there is no parent-death signal: a test binary
// that crashes can leave its servers running.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
