package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// process is a server binary started by the harness. It runs in its own
// process group, writes its output to a log file and, on Linux, is killed by
// the kernel if the test binary dies (see sysProcAttr).
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited
	waitErr error         // valid after done is closed
}

// startProcess starts path with args, output to logPath, with env (KEY=value)
// added to the test's environment.
//
// The start happens on a goroutine locked to its OS thread, which stays
// blocked in Wait for the child's whole life: Linux delivers the parent-death
// signal when the *thread* that forked the child exits, and the Go runtime
// may otherwise retire that thread while the child still runs.
func startProcess(name, path string, args []string, logPath string, env ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %s log: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = sysProcAttr()
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}

	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			logFile.Close()
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("kubetest: start %s: %w", name, err)
	}
	return p, nil
}

// exited reports whether the process has already exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes an early exit, with the end of the log.
func (p *process) exitError() error {
	return fmt.Errorf("kubetest: %s exited early (%v); last log lines:\n%s", p.name, p.waitErr, p.logTail(30))
}

// kill sends SIGKILL to the process group and waits for the process to exit.
// The harness throws all state away, so there is nothing to shut down
// gracefully, and SIGKILL keeps teardown fast.
func (p *process) kill(timeout time.Duration) error {
	if p.exited() {
		return nil
	}
	// A negative pid addresses the whole process group (Setpgid made the
	// child its leader), so helpers the server forked die too.
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kubetest: kill %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("kubetest: %s (pid %d) did not exit within %v of SIGKILL", p.name, p.cmd.Process.Pid, timeout)
	}
}

// logTail returns the last n lines of the process log.
func (p *process) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// logContains reports whether the process log contains s.
func (p *process) logContains(s string) bool {
	data, err := os.ReadFile(p.logPath)
	return err == nil && strings.Contains(string(data), s)
}
