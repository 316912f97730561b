package rdb_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
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
