package config_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestSentinelURLConnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := redistest.Shared(t)
	sentinel, err := redistest.StartSentinel("dtqtest", master.Addr, 1)
	require.NoError(t, err)
	t.Cleanup(sentinel.Stop)

	c, err := config.NewRedisClient("redis+sentinel://" + sentinel.Addr + "/dtqtest/0")
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Set(ctx, "sentineltest:k", "v", time.Minute).Err())
	direct := master.Client(t)
	require.Equal(t, "v", direct.Get(ctx, "sentineltest:k").Val(), "the write reached the master")
}

func TestClusterURLRunsScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := redistest.Start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	node := srv.Client(t)
	require.NoError(t, node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err())
	require.Eventually(t, func() bool {
		info, err := node.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 10*time.Second, 10*time.Millisecond)

	c, err := config.NewRedisClient("redis+cluster://" + srv.Addr)
	require.NoError(t, err)
	defer c.Close()
	_, ok := c.(*redis.ClusterClient)
	require.True(t, ok)

	// dtq's scripts keep each call in one slot, so they run on Cluster.
	dep := openDeployment(t, c, "clustertest")
	client, err := dep.NewClient(nil)
	require.NoError(t, err)
	res, err := client.Submit(ctx, dtq.Submission{Queue: "emails", Type: "send_receipt", IdempotencyKey: "order-1",
		Payload: map[string]any{"order_id": 1}})
	require.NoError(t, err)
	insp := dep.Inspector()
	task, err := insp.GetTask(ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, "send_receipt", task.Type)
}
