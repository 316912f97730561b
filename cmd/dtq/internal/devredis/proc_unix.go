//go:build unix

package devredis

import (
	"os"
	"os/exec"
	"syscall"
)

// detach puts the child in its own process group, out of reach of the
// terminal's Ctrl-C, so dev can stop it cleanly itself; where the OS allows
// it, the child is also told to stop (SIGTERM: a clean AOF shutdown) if dev
// dies without stopping it.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	parentDeathSignal(cmd.SysProcAttr)
}

// terminate asks p to shut down cleanly.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
