//go:build !linux

package twin

import "syscall"

// procAttr is empty where there is no parent-death signal: a caller that
// crashes can leave its servers and agents running.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
