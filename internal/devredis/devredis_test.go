package devredis_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dtq-io/dtq/internal/devredis"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func client(t *testing.T, b devredis.Backend) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(b.URL())
	require.NoError(t, err)
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServerKeepsDataAcrossRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), ".dtq")

	s, err := devredis.StartServer(ctx, dir)
	require.NoError(t, err)
	require.Contains(t, s.Describe(), "private redis-server, data in ")
	c := client(t, s)
	cfg, err := c.ConfigGet(ctx, "*").Result()
	require.NoError(t, err)
	require.Equal(t, "yes", cfg["appendonly"])
	require.Equal(t, "everysec", cfg["appendfsync"])
	require.Equal(t, "noeviction", cfg["maxmemory-policy"])
	require.Equal(t, "127.0.0.1", cfg["bind"])
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Stop(ctx))
	require.NoError(t, s.Stop(ctx), "Stop is idempotent")
	require.Error(t, c.Ping(ctx).Err())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)

	s2, err := devredis.StartServer(ctx, dir)
	require.NoError(t, err)
	defer s2.Stop(ctx)
	require.Equal(t, "v", client(t, s2).Get(ctx, "k").Val(), "the AOF brought the key back")
}

func TestServerCancelledStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := devredis.StartServer(ctx, t.TempDir())
	require.ErrorIs(t, err, context.Canceled)
}

func TestMemoryExpiresKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := devredis.StartMemory()
	require.NoError(t, err)
	defer m.Stop(ctx)
	require.Contains(t, m.Describe(), "memory only")
	c := client(t, m)
	require.NoError(t, c.Set(ctx, "short", "v", 30*time.Millisecond).Err())
	require.NoError(t, c.Set(ctx, "long", "v", time.Hour).Err())
	require.Eventually(t, func() bool { return c.Exists(ctx, "short").Val() == 0 },
		5*time.Second, 5*time.Millisecond, "the key never expired")
	require.EqualValues(t, 1, c.Exists(ctx, "long").Val())
}
