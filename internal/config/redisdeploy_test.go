package config_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/config"
	"github.com/dtq-io/dtq/internal/redistest"
)

// startRedisProcess runs redis-server with args on a free loopback port
// (the port is passed to args) and stops it when the test ends. A port
// another process took between the check and the start is tried again
// with another.
func startRedisProcess(t *testing.T, args func(port int, dir string) []string) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err)
	for try := 1; ; try++ {
		dir := t.TempDir()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		require.NoError(t, l.Close())
		cmd := exec.Command(bin, args(port, dir)...)
		out := &bytes.Buffer{}
		cmd.Stdout = out
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
		up := false
		for deadline := time.Now().Add(10 * time.Second); !up && time.Now().Before(deadline); {
			select {
			case <-exited:
				deadline = time.Time{}
			case <-time.After(10 * time.Millisecond):
				// This process's server, not one that took the port first.
				info, err := c.Info(context.Background(), "server").Result()
				up = err == nil && strings.Contains(info, "process_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n")
			}
		}
		_ = c.Close()
		if up {
			return port
		}
		_ = cmd.Process.Kill()
		<-exited // out is complete once the process has been waited for
		if try < 5 && strings.Contains(out.String(), "Address already in use") {
			continue
		}
		t.Fatalf("redis-server %v never answered: %s", args(port, dir), out)
	}
}

func TestSentinelURLConnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := redistest.Shared(t)
	_, masterPort, err := net.SplitHostPort(master.Addr)
	require.NoError(t, err)
	port := startRedisProcess(t, func(port int, dir string) []string {
		conf := filepath.Join(dir, "sentinel.conf")
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(
			"port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor dtqtest 127.0.0.1 %s 1\n", port, dir, masterPort)), 0o644))
		return []string{conf, "--sentinel"}
	})

	c, err := config.NewRedisClient(fmt.Sprintf("redis+sentinel://127.0.0.1:%d/dtqtest/0", port))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Set(ctx, "sentineltest:k", "v", time.Minute).Err())
	direct := master.Client(t)
	require.Equal(t, "v", direct.Get(ctx, "sentineltest:k").Val(), "the write reached the master")
}

func TestClusterURLRunsScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	port := startRedisProcess(t, func(port int, dir string) []string {
		return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"}
	})
	node := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer node.Close()
	require.NoError(t, node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err())
	require.Eventually(t, func() bool {
		info, err := node.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 10*time.Second, 10*time.Millisecond)

	c, err := config.NewRedisClient(fmt.Sprintf("redis+cluster://127.0.0.1:%d", port))
	require.NoError(t, err)
	defer c.Close()
	_, ok := c.(*redis.ClusterClient)
	require.True(t, ok)

	// dtq's scripts keep each call in one slot, so they run on Cluster.
	client, err := dtq.NewClient(c, &dtq.ClientConfig{KeyPrefix: "clustertest"})
	require.NoError(t, err)
	res, err := client.Submit(ctx, dtq.Submission{Queue: "emails", Type: "send_receipt", IdempotencyKey: "order-1",
		Payload: map[string]any{"order_id": 1}})
	require.NoError(t, err)
	insp, err := dtq.NewInspector(c, &dtq.InspectorConfig{KeyPrefix: "clustertest"})
	require.NoError(t, err)
	task, err := insp.GetTask(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, "send_receipt", task.Type)
}
