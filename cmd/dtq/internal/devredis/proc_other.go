//go:build !unix

package devredis

import (
	"os"
	"os/exec"
)

func detach(*exec.Cmd) {}

// terminate stops p; without signals there is no clean shutdown request.
func terminate(p *os.Process) error { return p.Kill() }
