package rdb

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeleteQueueOnlyWhenEmpty(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	b.ingest(t, "busy", b.task(t, "busy", ""))
	res, err := b.r.DeleteQueue(b.ctx, "busy")
	require.NoError(t, err)
	require.Equal(t, &DeleteQueueResult{NotEmpty: "live", Count: 1}, res)
	ok, err := b.r.QueueExists(b.ctx, "busy")
	require.NoError(t, err)
	require.True(t, ok, "a refused deletion changes nothing")

	_, err = b.r.DeleteQueue(b.ctx, "never")
	require.ErrorIs(t, err, ErrQueueNotRegistered)
}

func TestDeletedQueueNumberIsReusedAfterQuarantine(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	first, err := b.r.QueueNumber(b.ctx, "a")
	require.NoError(t, err)
	require.NoError(t, b.r.c.Set(b.ctx, b.r.keys.Paused("a"), "1", 0).Err())

	res, err := b.r.DeleteQueue(b.ctx, "a")
	require.NoError(t, err)
	require.True(t, res.Deleted)
	require.Equal(t, first, res.Number)
	n, err := b.r.c.Exists(b.ctx, b.r.keys.Paused("a")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the queue's structures are removed")
	queues, err := b.r.Queues(b.ctx)
	require.NoError(t, err)
	require.NotContains(t, queues, "a")
	name, err := b.r.QueueName(b.ctx, first)
	require.NoError(t, err)
	require.Empty(t, name)
	_, err = b.r.DeclaredQueueNumber(b.ctx, "a")
	require.ErrorIs(t, err, ErrQueueNotRegistered)

	// Within the quarantine the number stays free; a new queue gets the next.
	second, err := b.r.QueueNumber(b.ctx, "b")
	require.NoError(t, err)
	require.Equal(t, first+1, second)

	// Once it has passed (the entry is backdated here), the number returns.
	free, err := b.r.c.HGet(b.ctx, b.r.keys.Queues(), "#free").Result()
	require.NoError(t, err)
	require.Regexp(t, `^\d+:\d+$`, free)
	require.NoError(t, b.r.c.HSet(b.ctx, b.r.keys.Queues(), "#free", "1:0").Err())
	third, created, err := b.r.RegisterQueue(b.ctx, "c", true)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, uint16(1), third)
	free, err = b.r.c.HGet(b.ctx, b.r.keys.Queues(), "#free").Result()
	require.NoError(t, err)
	require.Empty(t, free)
	_, created, err = b.r.RegisterQueue(b.ctx, "c", true)
	require.NoError(t, err)
	require.False(t, created)
}
