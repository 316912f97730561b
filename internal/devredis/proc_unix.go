//go:build unix

package devredis

import (
	"os"
	"os/exec"
	"syscall"
)

// detach puts the child in its own process group, out of reach of the
// terminal's Ctrl-C.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminate asks p to shut down cleanly.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
