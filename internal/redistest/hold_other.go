//go:build !linux

package redistest

// holdPort returns a port nothing listens on. Without a way to bind a
// socket that never listens, the port is not held: another server may
// take it later.
func holdPort() (port int, release func(), err error) {
	port, err = freePort()
	return port, func() {}, err
}
