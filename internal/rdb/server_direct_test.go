package rdb_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/rdbtest"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestScriptsLoaded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, c := privateRDB(t)

	loaded, err := r.ScriptsLoaded(ctx)
	require.NoError(t, err)
	require.False(t, loaded, "a new server has no script cached")

	require.NoError(t, r.LoadScripts(ctx))
	loaded, err = r.ScriptsLoaded(ctx)
	require.NoError(t, err)
	require.True(t, loaded)

	require.NoError(t, c.ScriptFlush(ctx).Err())
	loaded, err = r.ScriptsLoaded(ctx)
	require.NoError(t, err)
	require.False(t, loaded, "a flush (or a restart) empties the cache")
}

func TestReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a healthy server is ready and gets the scripts", func(t *testing.T) {
		t.Parallel()
		r, _ := privateRDB(t)
		require.NoError(t, r.Ready(ctx))
		loaded, err := r.ScriptsLoaded(ctx)
		require.NoError(t, err)
		require.True(t, loaded, "Ready loads the scripts a restart lost")
	})

	tests := []struct {
		name   string
		args   []string
		check  string
		detail string
	}{
		{"an evicting server is not ready", []string{"--maxmemory-policy", "allkeys-lru"}, rdb.CheckMaxmemoryPolicy, ""},
		{"volatile eviction is refused too", []string{"--maxmemory-policy", "volatile-ttl"}, rdb.CheckMaxmemoryPolicy, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, _ := privateRDB(t, tt.args...)
			err := r.Ready(ctx)
			var re *rdb.ReadyError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tt.check, re.Check)
			require.Contains(t, err.Error(), tt.args[1])
		})
	}

	t.Run("an unreachable server", func(t *testing.T) {
		t.Parallel()
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
		defer c.Close()
		err := rdb.New(c, "p").Ready(ctx)
		var re *rdb.ReadyError
		require.ErrorAs(t, err, &re)
		require.Equal(t, rdb.CheckRedis, re.Check)
		require.Empty(t, re.Detail)
		require.NotNil(t, errors.Unwrap(err))
	})
}

func TestMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		args []string
		max  int64
	}{
		{"no maxmemory: no limit", nil, 0},
		{"maxmemory set", []string{"--maxmemory", "64mb"}, 64 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, c := privateRDB(t, tt.args...)
			m, ok, err := r.Memory(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, tt.max, m.MaxBytes)
			info, err := c.Info(ctx, "memory").Result()
			require.NoError(t, err)
			require.Contains(t, info, "used_memory:")
			require.Positive(t, m.UsedBytes)
		})
	}

	t.Run("used memory follows the data", func(t *testing.T) {
		t.Parallel()
		r, c := privateRDB(t)
		before, _, err := r.Memory(ctx)
		require.NoError(t, err)
		big := make([]byte, 1<<20)
		for i := range 8 {
			require.NoError(t, c.Set(ctx, "p:big:"+strconv.Itoa(i), big, 0).Err())
		}
		after, ok, err := r.Memory(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Greater(t, after.UsedBytes, before.UsedBytes+4<<20)
	})

}

// TestMissingScriptsAreKnownByTheirPrefix: a script missing from the cache
// is recognised by the reply's NOSCRIPT prefix alone, not its wording
// (which servers and proxies change): with every reply's text reworded, a
// flushed cache still reloads, alone and in a pipeline.
func TestMissingScriptsAreKnownByTheirPrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	proxy, err := faultproxy.Start(srv.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	proxy.RewriteReplies([]byte("NOSCRIPT No matching script"), []byte("NOSCRIPT script missing from the cache"))
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	admin := srv.Client(t)

	err = c.Do(ctx, "EVALSHA", "0000000000000000000000000000000000000000", 0).Err()
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "NOSCRIPT script missing from the cache"), "the proxy rewords: %v", err)

	r := rdb.New(c, "p")
	f := rdbtest.New(r)
	for range 3 {
		require.NoError(t, admin.ScriptFlush(ctx).Err())
		f.Make(t, dtqtype.StatusRunning, rdbtest.Task{}) // ingest and claim, each missing at first
	}
	require.NoError(t, admin.ScriptFlush(ctx).Err())
	first, err := r.ListTasks(ctx, &dtqtype.TaskListParams{Queue: rdbtest.DefaultQueue, Limit: 1})
	require.NoError(t, err)
	require.Len(t, first.Items, 1)
	require.NotEmpty(t, first.NextCursor)
	require.NoError(t, admin.ScriptFlush(ctx).Err())
	next, err := r.ListTasks(ctx, &dtqtype.TaskListParams{Queue: rdbtest.DefaultQueue, Limit: 2, Cursor: first.NextCursor})
	require.NoError(t, err, "list_page, sent in a pipeline")
	require.Len(t, next.Items, 2)
}
