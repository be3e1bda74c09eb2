package twin

import "syscall"

// procAttr asks the kernel to SIGKILL a server or agent the twin started
// when the process that started it dies, so nothing is left running.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
