package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server exit when the test process dies, even by
// SIGKILL or a test timeout, so no orphaned redis-server outlives a run.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
