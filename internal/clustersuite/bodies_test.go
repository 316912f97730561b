package clustersuite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// TestQueuedBodiesOnEveryMaster: on queues served by three masters, every
// script that takes a queued task's band entry away without starting it
// (cancel, purge, the expiry sweep, expiry at claim, a key-concurrency
// hold) moves the entry's payload and metadata into the task hash, on the
// queue's own master; the started task carries its own.
func TestQueuedBodiesOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("bodies")
	ctx := context.Background()
	client, err := dtq.NewClient(cc, &dtq.ClientConfig{KeyPrefix: prefix})
	require.NoError(t, err)
	insp, err := dtq.NewInspector(cc, &dtq.InspectorConfig{KeyPrefix: prefix})
	require.NoError(t, err)
	r := rdb.New(cc, prefix)
	keys := rdb.NewKeys(prefix)
	as := &rdb.AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true}
	ws := &rdb.WorkerSettings{WorkerID: "w1", Lease: time.Minute, EventsMaxLen: 1000, SucceededRetention: time.Hour,
		FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 100}
	later := time.Now().Add(time.Hour) // past every expiry below

	for _, q := range queuesOnEveryMaster(t, c, prefix) {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			submit := func(name string, mod func(*dtq.Submission)) string {
				s := dtq.Submission{Queue: q, Type: "t",
					Payload:  map[string]string{"name": name, "pad": strings.Repeat("x", 100)},
					Metadata: map[string]string{"trace": "trace-" + name}}
				if mod != nil {
					mod(&s)
				}
				res, err := client.Submit(ctx, s)
				require.NoError(t, err)
				return res.TaskID
			}
			requireBody := func(id, name string, want dtqtype.Status) {
				t.Helper()
				ti, err := insp.GetTask(ctx, id)
				require.NoError(t, err)
				require.Equal(t, want, ti.Status)
				require.Contains(t, string(ti.Payload), fmt.Sprintf(`"name":%q`, name))
				require.JSONEq(t, fmt.Sprintf(`{"trace":"trace-%s"}`, name), string(ti.Metadata))
			}
			expiring := func(s *dtq.Submission) { s.ExpiresAt = time.Now().Add(time.Minute) }
			keyed := func(s *dtq.Submission) { s.ConcurrencyKey = "k" }

			cancelled := submit("cancelled", nil)
			out, _, err := r.CancelTask(ctx, q, cancelled, as, time.Now(), "test")
			require.NoError(t, err)
			require.Equal(t, "cancelled", out)

			swept := submit("swept", expiring)
			_, err = r.SweepExpired(ctx, q, ws, later)
			require.NoError(t, err)

			purged := submit("purged", func(s *dtq.Submission) { s.Priority = dtq.Priority(0) })
			n, err := r.PurgeQueue(ctx, q, as, time.Now())
			require.NoError(t, err)
			require.Equal(t, int64(1), n)

			require.NoError(t, r.EnsureGroups(ctx, q))
			_, err = r.SetLimits(ctx, q, rdb.Limits{KeyConcurrency: 1})
			require.NoError(t, err)
			overdue := submit("overdue", expiring)
			started := submit("started", keyed)
			held := submit("held", keyed)
			cr, err := r.Claim(ctx, q, ws, 10, later, "n-"+q)
			require.NoError(t, err)
			require.Len(t, cr.Tasks, 1)
			require.Equal(t, started, cr.Tasks[0].ID)
			require.Contains(t, string(cr.Tasks[0].Payload), `"name":"started"`)
			require.Equal(t, 1, cr.Held)

			requireBody(cancelled, "cancelled", dtqtype.StatusCancelled)
			requireBody(swept, "swept", dtqtype.StatusExpired)
			requireBody(purged, "purged", dtqtype.StatusCancelled)
			requireBody(overdue, "overdue", dtqtype.StatusExpired)
			requireBody(started, "started", dtqtype.StatusRunning)
			requireBody(held, "held", dtqtype.StatusQueued)
			for b := range rdb.NumBands {
				require.Zero(t, cc.XLen(ctx, keys.Stream(q, b)).Val(), "band %d", b)
			}
		})
	}
}
