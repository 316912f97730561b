package redistest

import (
	"fmt"
	"syscall"
)

// holdPort binds a TCP socket to a free loopback port and never listens on
// it: connections there are refused, and without SO_REUSEADDR on it no
// other socket can bind the port until release.
func holdPort() (port int, release func(), err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return 0, nil, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return 0, nil, err
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		_ = syscall.Close(fd)
		return 0, nil, fmt.Errorf("redistest: bound to %T, not an IPv4 address", sa)
	}
	return in4.Port, func() { _ = syscall.Close(fd) }, nil
}
