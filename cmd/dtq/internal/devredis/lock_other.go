//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package devredis

import "os"

func tryLock(*os.File) (bool, error) { return false, ErrLockUnsupported }
