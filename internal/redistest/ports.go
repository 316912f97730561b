package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
)

// downPorts are the ports of servers this process killed and may restart:
// freePort skips them, so a server started meanwhile cannot take a port a
// test expects to be down and to come back on.
var downPorts struct {
	sync.Mutex
	set map[int]bool
}

func markDown(port int, down bool) {
	downPorts.Lock()
	defer downPorts.Unlock()
	if downPorts.set == nil {
		downPorts.set = map[int]bool{}
	}
	if down {
		downPorts.set[port] = true
	} else {
		delete(downPorts.set, port)
	}
}

func isDown(port int) bool {
	downPorts.Lock()
	defer downPorts.Unlock()
	return downPorts.set[port]
}

// freePort returns a loopback port nothing listens on and no killed server
// of this process waits to restart on.
func freePort() (int, error) {
	for {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		addr, ok := l.Addr().(*net.TCPAddr)
		_ = l.Close() // never accepted on: nothing to flush
		if !ok {
			return 0, fmt.Errorf("redistest: listening on %v, not a TCP address", l.Addr())
		}
		port := addr.Port
		if !isDown(port) {
			return port, nil
		}
	}
}

// DownAddr returns a loopback address where connections are refused for the
// rest of the test: the port stays bound by a socket that never listens, so
// no server, in this process or another, can start on it meanwhile (a port
// merely closed again can be handed to the next server that asks for one).
func DownAddr(t testing.TB) string {
	t.Helper()
	port, release, err := holdPort()
	if err != nil {
		t.Fatalf("redistest: hold a port that refuses connections: %v", err)
	}
	t.Cleanup(release)
	return "127.0.0.1:" + strconv.Itoa(port)
}
