package rdb

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

// TestReplicaAcks: with replica acknowledgements on, a write on a master
// without replicas fails with ErrNotReplicated (it ran, it was not
// replicated); with a replica attached it succeeds. Claims never wait.
func TestReplicaAcks(t *testing.T) {
	t.Parallel()
	master, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(master.Stop)
	c := master.Client(t)
	b := &testRDB{ctx: t.Context(), r: New(c, "ra"), c: c, keys: NewKeys("ra"), now: time.Now(),
		opt: IngestOptions{MaxDepth: 100, EventsMaxLen: 1000, RecentCap: 1000}}
	b.r.SetReplicaAcks(1, 50*time.Millisecond)

	nt := b.task(t, "q", "")
	_, err = b.r.Ingest(b.ctx, "q", b.now, b.opt, []NewTask{nt})
	require.ErrorIs(t, err, ErrNotReplicated)
	require.EqualValues(t, 1, c.Exists(b.ctx, b.keys.Task("q", nt.ID)).Val(), "it ran on the master")
	require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
	_, err = b.r.Claim(b.ctx, "q", testSettings, 1, b.now, "n")
	require.NoError(t, err, "a claim does not wait for replicas")

	replica, err := redistest.Start("--replicaof", strings.Replace(master.Addr, ":", " ", 1))
	require.NoError(t, err)
	t.Cleanup(replica.Stop)
	rc := replica.Client(t)
	require.Eventually(t, func() bool {
		info, err := rc.Info(b.ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 30*time.Second, 20*time.Millisecond)
	b.r.SetReplicaAcks(1, 5*time.Second)
	nt2 := b.task(t, "q", "")
	_, err = b.r.Ingest(b.ctx, "q", b.now, b.opt, []NewTask{nt2})
	require.NoError(t, err)
	require.EqualValues(t, 1, rc.Exists(b.ctx, b.keys.Task("q", nt2.ID)).Val(), "the replica has it when the write is answered")
}
