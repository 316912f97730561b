//go:build unix && !linux

package devredis

import "syscall"

// parentDeathSignal is a no-op where the OS has no parent-death signal.
func parentDeathSignal(*syscall.SysProcAttr) {}
