package cli

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDevTwiceIsRefused runs a second `dtq dev` on the first one's data
// directory: it must fail at once, naming the directory, the holder's pid
// and --data-dir, and must leave the first instance's Redis alone.
func TestDevTwiceIsRefused(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), ".dtq")
	first := startCmd(t, nil, "dev", "--redis=server", "--api-addr=127.0.0.1:0", "--data-dir="+dataDir, "--drain-timeout-s=1")
	first.waitHealthy(t)
	status, _, created := first.do(t, http.MethodPost, "/api/v1/tasks", map[string]string{"Idempotency-Key": "twice-1"},
		`{"task_type": "echo", "payload": {"n": 1}}`)
	require.Equal(t, http.StatusAccepted, status, "%v", created)
	id := created["task_id"].(string)

	redisLog := filepath.Join(dataDir, "redis.log")
	before, err := os.ReadFile(redisLog)
	require.NoError(t, err)

	start := time.Now()
	code, stdout, stderr := runCmd(t, nil, "dev", "--redis=server", "--api-addr=127.0.0.1:0", "--data-dir="+dataDir)
	require.Equal(t, exitUsage, code, stderr)
	require.Empty(t, stdout)
	abs, err := filepath.Abs(dataDir)
	require.NoError(t, err)
	require.Contains(t, stderr, fmt.Sprintf("data directory %s is in use by process %d", abs, os.Getpid()))
	require.Contains(t, stderr, "--data-dir")
	require.Less(t, time.Since(start), 5*time.Second, "refused at once")

	// No second redis-server started on the directory: its log is as it was.
	after, err := os.ReadFile(redisLog)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))

	// The first instance still serves its data.
	status, _, got := first.do(t, http.MethodGet, "/api/v1/tasks/"+id+"?wait=10s", nil, "")
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.Equal(t, "succeeded", got["status"])
	require.Equal(t, 0, first.stop(t), "stderr:\n%s", first.stderr)

	// Once the first has stopped, the directory is free again.
	again := startCmd(t, nil, "dev", "--redis=server", "--api-addr=127.0.0.1:0", "--data-dir="+dataDir, "--drain-timeout-s=1")
	again.waitHealthy(t)
	status, _, got = again.do(t, http.MethodGet, "/api/v1/tasks/"+id, nil, "")
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.Equal(t, 0, again.stop(t), "stderr:\n%s", again.stderr)
}

// TestDevBusyPortStartsNoRedis checks the API address before any Redis is
// started: a busy port fails without creating a server in the directory.
func TestDevBusyPortStartsNoRedis(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	dataDir := filepath.Join(t.TempDir(), ".dtq")
	code, _, stderr := runCmd(t, nil, "dev", "--redis=server", "--api-addr="+busy.Addr().String(), "--data-dir="+dataDir)
	require.Equal(t, exitFailure, code, stderr)
	require.Contains(t, stderr, fmt.Sprintf("cannot listen on %s (DTQ_API_ADDR): the address is in use, by another dtq dev or another program; "+
		"give this one its own address: --api-addr 127.0.0.1:", busy.Addr()))
	_, err = os.Stat(filepath.Join(dataDir, "redis.log"))
	require.True(t, os.IsNotExist(err), "no redis-server was started")
}

func TestSuggestDataDir(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{".dtq": ".dtq-2", "./.dtq/": ".dtq-2", "/tmp/x": "/tmp/x-2"} {
		require.Equal(t, want, suggestDataDir(in), in)
	}
}
