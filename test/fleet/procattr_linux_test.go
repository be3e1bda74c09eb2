package fleet

import "syscall"

// procAttr asks the kernel to SIGKILL a server or agent the test started
// when the test binary dies, so a crashed test leaves nothing running.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
