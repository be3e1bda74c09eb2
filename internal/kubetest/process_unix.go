//go:build unix && !linux

package kubetest

import "syscall"

// sysProcAttr puts the child in its own process group, so Stop can kill
// everything it started. Only Linux offers a parent-death signal; elsewhere a
// test binary that crashes before Stop can leave its servers running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
