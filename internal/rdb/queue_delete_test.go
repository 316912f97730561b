package rdb

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
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

// TestQueuesReadsTheNamesOnlyWhenTheyChange: a loop listing the queues
// each second costs one HGET of the change counter while nothing changes,
// and still sees at once what another process registers or deletes.
func TestQueuesReadsTheNamesOnlyWhenTheyChange(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	counted, n := s.Counted(t)
	reader := New(counted.Client, s.Prefix)
	writer := New(s.Client, s.Prefix)
	ctx := context.Background()
	key := reader.Keys().Queues()
	list := func() []string {
		t.Helper()
		qs, err := reader.Queues(ctx)
		require.NoError(t, err)
		return qs
	}

	require.Empty(t, list())
	_, err := writer.QueueNumber(ctx, "a")
	require.NoError(t, err)
	_, err = writer.QueueNumber(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, list())
	full := n.Count("hgetall", key)
	for range 5 {
		require.Equal(t, []string{"a", "b"}, list())
	}
	require.Equal(t, full, n.Count("hgetall", key), "an unchanged registry is not read again")

	res, err := writer.DeleteQueue(ctx, "a")
	require.NoError(t, err)
	require.True(t, res.Deleted)
	require.Equal(t, []string{"b"}, list(), "a deletion elsewhere is seen at once")
	_, err = writer.QueueNumber(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, list(), "a registration elsewhere is seen at once")

	// A registry lost with its node is read again, as is one rebuilt.
	require.NoError(t, s.Client.Del(ctx, key).Err())
	require.Empty(t, list())
	got := list()
	got = append(got, "mutated")
	require.NotEqual(t, got, list(), "callers get their own copy")
}
