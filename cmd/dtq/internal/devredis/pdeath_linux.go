package devredis

import "syscall"

// parentDeathSignal asks Linux to send SIGTERM to the child when dev dies.
func parentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }
