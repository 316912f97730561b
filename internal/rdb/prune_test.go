package rdb

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

func TestPruneConsumersKeepsBusyOnes(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	r := New(s.Client, s.Prefix)
	ctx := context.Background()
	require.NoError(t, r.EnsureGroups(ctx, "q"))
	stream := r.keys.Stream("q", 5)
	// "idle" read nothing pending; "busy" holds an unacked entry.
	require.NoError(t, s.Client.XGroupCreateConsumer(ctx, stream, Group, "idle").Err())
	require.NoError(t, s.Client.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"t", "x", "a", "1"}}).Err())
	require.NoError(t, s.Client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "busy",
		Streams: []string{stream, ">"}, Count: 1, Block: -1}).Err())

	n, err := r.PruneConsumers(ctx, "q", time.Hour) // nobody idle that long
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = r.PruneConsumers(ctx, "q", 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	cs, err := s.Client.XInfoConsumers(ctx, stream, Group).Result()
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, "busy", cs[0].Name)
}
