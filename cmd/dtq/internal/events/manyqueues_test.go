package events

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

// manyQueues returns n queue names, q0001 to qNNNN.
func manyQueues(n int) []string {
	qs := make([]string, n)
	for i := range qs {
		qs[i] = fmt.Sprintf("q%04d", i+1)
	}
	return qs
}

// TestManyQueuesFewConnections checks the connection bound of the feed: with
// 1,000 queues and one unfiltered client, the hub holds one connection per
// group of streamsPerRead streams, and none once the client has left.
func TestManyQueuesFewConnections(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start() // a server of its own: its client count is this test's
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	// The API's own pool is capped, and is its only pool (no separate one
	// for pipelines), so that the count measures what the feed's reading
	// costs rather than how far that pool grew.
	const apiPool = 4
	api := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: apiPool, MaxActiveConns: apiPool, PipelinePoolSize: -1})
	t.Cleanup(func() { _ = api.Close() })
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	t.Cleanup(func() { _ = probe.Close() })

	b := setupOn(t, api, "dtq", nil)
	queues := manyQueues(1000)
	b.register(t, queues...)
	b.waitReaders(t, queues...)
	groups := (len(queues) + 1 + streamsPerRead - 1) / streamsPerRead // the queues and the worker events
	require.Equal(t, 4, groups)
	bound := 1 + apiPool + groups // the probe, the API's pool, one per group

	// Nobody watches: the hub holds no connection beyond the API's pool.
	outsidePool := func() int {
		n, _ := redistest.ClientCounts(t, probe)
		return n - 1 - int(api.PoolStats().TotalConns)
	}
	require.Eventually(t, func() bool { return outsidePool() == 0 }, 20*time.Second, 10*time.Millisecond)

	c := b.openSSE(t, "", "")
	c.start(t)
	var most atomic.Int64 // the most connections seen while the client watched
	sample := func() (connected, blocked int) {
		connected, blocked = redistest.ClientCounts(t, probe)
		if int64(connected) > most.Load() {
			most.Store(int64(connected))
			if connected > bound {
				l, _ := probe.ClientList(context.Background()).Result()
				t.Logf("%d connections, over the bound of %d:\n%s", connected, bound, l)
			}
		}
		return connected, blocked
	}
	// Every reader has started once each group blocks in its XREAD.
	require.Eventually(t, func() bool { _, blocked := sample(); return blocked == groups },
		30*time.Second, 10*time.Millisecond, "one blocking read per group")

	first := b.add(t, queues[0], taskEvent(TypeTaskQueued))
	last := b.add(t, queues[len(queues)-1], taskEvent(TypeTaskQueued))
	got := map[string]bool{}
	for range 2 {
		got[envelopeOf(t, c.nextEvent(t).data)["event_id"].(string)] = true
		sample()
	}
	require.Equal(t, map[string]bool{queues[0] + "/" + first[0]: true, queues[len(queues)-1] + "/" + last[0]: true}, got)
	sample()
	t.Logf("at most %d connections while %d queues were watched (bound %d)", most.Load(), len(queues), bound)
	require.LessOrEqual(t, int(most.Load()), bound, "connections while 1,000 queues are watched")

	// The last client leaves: the groups close their connections.
	c.close()
	require.Eventually(t, func() bool {
		_, blocked := redistest.ClientCounts(t, probe)
		return blocked == 0 && outsidePool() == 0
	}, 20*time.Second, 10*time.Millisecond, "back to the API's own connections")
}

// TestPollingFollowsManyStreams runs the readers as on Redis Cluster, where
// one XREAD cannot name streams of different queues and the groups poll
// instead: live events, order within a queue, parking and resuming.
func TestPollingFollowsManyStreams(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	b := setupOn(t, s.Client, s.Prefix, nil, func(h *Hub) { h.pollStreams = true })
	queues := manyQueues(300) // two groups
	b.register(t, queues...)
	b.waitReaders(t, queues...)
	one, far := queues[0], queues[len(queues)-1]

	c := b.openSSE(t, "", "")
	c.start(t)
	want := map[string][]string{}
	for _, id := range b.add(t, one, taskEvent(TypeTaskQueued), taskEvent(TypeTaskStarted), taskEvent(TypeTaskSucceeded)) {
		want[one] = append(want[one], one+"/"+id)
	}
	for _, id := range b.add(t, far, taskEvent(TypeTaskQueued), taskEvent(TypeTaskStarted)) {
		want[far] = append(want[far], far+"/"+id)
	}
	got := map[string][]string{}
	var cursor string
	for range 5 {
		f := c.nextEvent(t)
		env := envelopeOf(t, f.data)
		q := env["queue"].(string)
		got[q] = append(got[q], env["event_id"].(string))
		cursor = f.id
	}
	require.Equal(t, want, got, "each queue in order, nothing twice")
	c.close()

	// Written while nobody watches (the readers park), delivered on resume.
	missed := b.add(t, far, taskEvent(TypeTaskRetryScheduled))
	back := b.openSSE(t, "", cursor)
	back.start(t)
	require.Equal(t, far+"/"+missed[0], envelopeOf(t, back.nextEvent(t).data)["event_id"])
	live := b.add(t, one, taskEvent(TypeTaskQueued))
	require.Equal(t, one+"/"+live[0], envelopeOf(t, back.nextEvent(t).data)["event_id"])
}
