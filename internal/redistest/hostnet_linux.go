package redistest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// lockHostNetwork takes the host network lock (see HostNetwork), shared
// or exclusive, waiting for it; release gives it back.
func lockHostNetwork(exclusive bool) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "dtq-host-network.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil // closing the file releases the lock
}
