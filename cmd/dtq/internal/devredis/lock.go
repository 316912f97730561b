package devredis

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFileName is the file in a data directory that LockDir locks.
const LockFileName = "dev.lock"

// DirLock is an exclusive hold on a data directory. The operating system
// releases it when the process ends, however it ends, so a crashed `dtq
// dev` never leaves a directory locked.
type DirLock struct {
	f   *os.File
	dir string
}

// LockedError is returned by LockDir when another process holds the lock.
type LockedError struct {
	Dir string // absolute path of the directory
	PID int    // the holder's pid, 0 when it could not be read
}

// Error names the directory and the holder.
func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("data directory %s is in use by %s (another dtq dev?)", e.Dir, holder)
}

// ErrLockUnsupported is returned by LockDir on systems without file locks.
var ErrLockUnsupported = errors.New("devredis: file locks are not supported on this system")

// LockDir creates dir if needed and takes an exclusive lock on it, without
// waiting: when another process holds it, the answer is a *LockedError with
// that process's pid. The holder's pid is written into the lock file.
func LockDir(dir string) (*DirLock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("devredis: create data directory: %w", err)
	}
	path := filepath.Join(abs, LockFileName)
	f, err := os.OpenFile(filepath.Clean(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devredis: open lock file: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("devredis: lock %s: %w", path, err)
	}
	if !held {
		b, _ := os.ReadFile(filepath.Clean(path))
		f.Close()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return nil, &LockedError{Dir: abs, PID: pid}
	}
	// The pid is for the message a second run prints; the lock itself is
	// the flock, not the file's content.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{f: f, dir: abs}, nil
}

// Dir returns the locked directory's absolute path.
func (l *DirLock) Dir() string { return l.dir }

// Unlock releases the lock. The lock file stays: removing it would race
// with a process that has just opened it.
func (l *DirLock) Unlock() error {
	_ = l.f.Truncate(0)
	return l.f.Close() // closing the descriptor releases the flock
}
