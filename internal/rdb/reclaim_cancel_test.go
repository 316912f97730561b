package rdb

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/faultproxy"
)

// TestReclaimOfACancelRequestedTaskSentAgainAnswersTheSame: a reclaim ends
// an expired task with a cancel request cancelled, whether the reclaiming
// process has a free slot (a Go worker) or none (the API process, for
// HTTP workers), and takes over or requeues the other one. Its reply is
// lost on the way (the fault proxy); sent again with the same time and
// nonce, it answers what its first run did and counts nothing twice. The
// old worker's late finalize is refused.
func TestReclaimOfACancelRequestedTaskSentAgainAnswersTheSame(t *testing.T) {
	t.Parallel()
	for _, room := range []int{10, 0} {
		t.Run("room "+map[int]string{10: "free", 0: "none"}[room], func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
			cancelled, other := b.task(t, "q", ""), b.task(t, "q", "")
			b.ingest(t, "q", cancelled, other)
			cr, err := b.r.Claim(b.ctx, "q", testSettings, 2, b.now, "c1")
			require.NoError(t, err)
			require.Len(t, cr.Tasks, 2)
			st, _, err := b.r.CancelTask(b.ctx, "q", cancelled.ID, testAdmin, b.now, "stop it")
			require.NoError(t, err)
			require.Equal(t, "requested", st)

			proxy, err := faultproxy.Start(b.c.Options().Addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = proxy.Close() })
			pc := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1}) // a lost reply is not sent again
			t.Cleanup(func() { _ = pc.Close() })
			via := New(pc, b.keys.Prefix())
			proxy.CutAfter([]byte(ScriptHash("reclaim")), 1)
			later := b.now.Add(time.Minute) // both leases expired
			peer := *testSettings
			peer.WorkerID = "w2"
			_, err = via.Reclaim(b.ctx, "q", &peer, room, later, "r1", nil)
			require.Error(t, err, "the reply was lost")
			require.EqualValues(t, 1, proxy.Cuts())

			check := func(got []ClaimedTask) {
				t.Helper()
				ti := b.get(t, cancelled.ID)
				require.Equal(t, dtqtype.StatusCancelled, ti.Status)
				require.Equal(t, 1, ti.Attempt)
				require.Equal(t, "cancelled", ti.Attempts[0].Outcome)
				require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_CANCEL_REQUESTED", "TASK_CANCELLED"},
					b.eventTypes(t, "q", cancelled.ID))
				require.Equal(t, redis.Nil, b.c.ZScore(b.ctx, b.keys.Lease("q"), cancelled.ID).Err(), "no lease")
				retained := 0
				for field, n := range b.c.HGetAll(b.ctx, b.keys.Retained("q")).Val() {
					if strings.HasPrefix(field, "cancelled:") {
						retained += atoi(t, n)
					}
				}
				require.Equal(t, 1, retained, "retention started once")
				require.Equal(t, "1", b.c.Get(b.ctx, b.keys.Depth("q")).Val(), "the other task is live")
				o := b.get(t, other.ID)
				require.Equal(t, 2, o.Attempt)
				if room > 0 {
					require.Len(t, got, 1)
					require.Equal(t, other.ID, got[0].ID)
					require.Equal(t, dtqtype.StatusRunning, o.Status)
				} else {
					require.Empty(t, got)
					require.Equal(t, dtqtype.StatusQueued, o.Status)
				}
			}
			got, err := via.Reclaim(b.ctx, "q", &peer, room, later, "r1", nil)
			require.NoError(t, err)
			check(got)
			again, err := via.Reclaim(b.ctx, "q", &peer, room, later, "r1", nil)
			require.NoError(t, err)
			require.Equal(t, got, again)
			check(again)

			// The old worker's late outcomes are refused; the task stays cancelled.
			errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, later, []Success{{ID: cancelled.ID, Attempt: 1}})
			require.NoError(t, err)
			require.ErrorIs(t, errs[0], ErrLeaseLost)
			require.Equal(t, dtqtype.StatusCancelled, b.get(t, cancelled.ID).Status)
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
