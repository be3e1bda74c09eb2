package kubetest

import "syscall"

// sysProcAttr puts the child in its own process group, so Stop can kill
// everything it started, and asks the kernel to SIGKILL it when the test
// binary dies, so a crashed or timed-out test leaves no servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
