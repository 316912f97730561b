package redistest

import (
	"errors"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A down address refuses connections, and a redis-server asked to start on
// it cannot: a test that expects Redis to be unreachable there stays right
// however many servers other tests start meanwhile.
func TestDownAddrStaysDown(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("ports are held only on Linux")
	}
	addr := DownAddr(t)
	_, err := net.DialTimeout("tcp", addr, time.Second)
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "dial %s: %v", addr, err)

	bin, err := ServerBinary()
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	dir := t.TempDir()
	s := &Server{Addr: addr, dir: dir, bin: bin, args: []string{
		"--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--logfile", dir + "/redis.log",
	}}
	s.port, _ = strconv.Atoi(port)
	t.Cleanup(s.Stop)
	err = s.start()
	require.Error(t, err, "redis-server started on a held port")
	log, _ := os.ReadFile(dir + "/redis.log")
	require.Contains(t, string(log), "Address already in use")
}
