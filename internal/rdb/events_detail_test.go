package rdb

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// eventsRDB is a test RDB whose queue "q" has the event detail mode and
// the limits l (nil: none besides the mode).
func eventsRDB(t *testing.T, mode string, l *dtqtype.QueueLimits) *testRDB {
	t.Helper()
	b := newTestRDB(t)
	require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
	if l == nil {
		l = &dtqtype.QueueLimits{}
	}
	set := *l
	set.Events = mode
	_, err := b.r.SetLimits(b.ctx, "q", &set)
	require.NoError(t, err)
	return b
}

// submit ingests one task of "q" (changed by mod) and returns its id.
func (b *testRDB) submit(t *testing.T, mod func(*NewTask)) string {
	t.Helper()
	nt := b.task(t, "q", "")
	if mod != nil {
		mod(&nt)
	}
	res := b.ingest(t, "q", nt)
	require.Equal(t, Created, res[0].Outcome)
	return nt.ID
}

// claimAt claims the one task ready in "q" at now.
func (b *testRDB) claimAt(t *testing.T, now time.Time) ClaimedTask {
	t.Helper()
	cr, err := b.r.Claim(b.ctx, "q", testSettings, 1, now, "")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	return cr.Tasks[0]
}

// promoteAt runs the promotion of "q" at now.
func (b *testRDB) promoteAt(t *testing.T, now time.Time) {
	t.Helper()
	p, err := b.r.Promote(b.ctx, "q", testSettings, now)
	require.NoError(t, err)
	require.Equal(t, 1, p.Done)
}

// TestEventDetailPerScript: for each script that writes a task's events,
// a queue with events "outcomes" gets exactly the outcome events of the
// same lifecycle a queue with "full" (and one with no setting) records in
// full, in the same order.
func TestEventDetailPerScript(t *testing.T) {
	t.Parallel()
	fair := &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}}
	cases := []struct {
		name     string
		limits   *dtqtype.QueueLimits
		run      func(t *testing.T, b *testRDB) string
		full     []string
		outcomes []string
	}{{
		name: "ingest, claim, succeed",
		run: func(t *testing.T, b *testRDB) string {
			id := b.submit(t, nil)
			ct := b.claimAt(t, b.now)
			errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
			return id
		},
		full:     []string{"TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"},
		outcomes: []string{"TASK_SUCCEEDED"},
	}, {
		name:   "key queues: ingest, claim, succeed",
		limits: fair,
		run: func(t *testing.T, b *testRDB) string {
			id := b.submit(t, func(nt *NewTask) { nt.ConcurrencyKey = "acme" })
			ct := b.claimAt(t, b.now)
			errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
			return id
		},
		full:     []string{"TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"},
		outcomes: []string{"TASK_SUCCEEDED"},
	}, {
		name: "delayed ingest, promote, claim, retry, promote, claim, dead letter",
		run: func(t *testing.T, b *testRDB) string {
			id := b.submit(t, func(nt *NewTask) { nt.AvailableAt = b.now.Add(time.Second).UnixMilli(); nt.MaxAttempts = 2 })
			t1 := b.now.Add(2 * time.Second)
			b.promoteAt(t, t1)
			ct := b.claimAt(t, t1)
			require.NoError(t, b.r.FinishRetry(b.ctx, finishArgsOf(ct, t1), testSettings, time.Second, "Boom", "boom"))
			t2 := t1.Add(2 * time.Second)
			b.promoteAt(t, t2)
			ct = b.claimAt(t, t2)
			require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(ct, t2), testSettings, "Boom", "boom", true))
			return id
		},
		full: []string{"TASK_PENDING", "TASK_QUEUED", "TASK_STARTED", "TASK_RETRY_SCHEDULED", "TASK_RETRIED",
			"TASK_STARTED", "TASK_DEAD_LETTERED"},
		outcomes: []string{"TASK_RETRY_SCHEDULED", "TASK_DEAD_LETTERED"},
	}, {
		name: "run-now of a retrying task",
		run: func(t *testing.T, b *testRDB) string {
			id := b.submit(t, nil)
			ct := b.claimAt(t, b.now)
			require.NoError(t, b.r.FinishRetry(b.ctx, finishArgsOf(ct, b.now), testSettings, time.Hour, "Boom", "boom"))
			st, _, err := b.r.RunNow(b.ctx, "q", id, testAdmin, b.now)
			require.NoError(t, err)
			require.Equal(t, "queued", st)
			return id
		},
		full:     []string{"TASK_QUEUED", "TASK_STARTED", "TASK_RETRY_SCHEDULED", "TASK_RETRIED"},
		outcomes: []string{"TASK_RETRY_SCHEDULED"},
	}, {
		name: "cancel of a queued task",
		run: func(t *testing.T, b *testRDB) string {
			id := b.submit(t, nil)
			_, _, err := b.r.CancelTask(b.ctx, "q", id, testAdmin, b.now, "no longer needed")
			require.NoError(t, err)
			return id
		},
		full:     []string{"TASK_QUEUED", "TASK_CANCELLED"},
		outcomes: []string{"TASK_CANCELLED"},
	}, {
		name: "expiry at the claim",
		run: func(t *testing.T, b *testRDB) string {
			id := b.submit(t, func(nt *NewTask) { nt.ExpiresAt = b.now.Add(time.Second).UnixMilli() })
			cr, err := b.r.Claim(b.ctx, "q", testSettings, 1, b.now.Add(time.Minute), "")
			require.NoError(t, err)
			require.Empty(t, cr.Tasks)
			return id
		},
		full:     []string{"TASK_QUEUED", "TASK_EXPIRED"},
		outcomes: []string{"TASK_EXPIRED"},
	}, {
		name: "reclaim of an expired lease",
		run: func(t *testing.T, b *testRDB) string {
			id := b.submit(t, nil)
			b.claimAt(t, b.now)
			w2 := *testSettings
			w2.WorkerID = "w2"
			got, err := b.r.Reclaim(b.ctx, "q", &w2, 10, b.now.Add(time.Hour), "r1", nil)
			require.NoError(t, err)
			require.Len(t, got, 1)
			return id
		},
		full:     []string{"TASK_QUEUED", "TASK_STARTED", "TASK_LEASE_LOST"},
		outcomes: []string{"TASK_LEASE_LOST"},
	}, {
		name: "hand-back, claim again, cancel requested",
		run: func(t *testing.T, b *testRDB) string {
			id := b.submit(t, nil)
			ct := b.claimAt(t, b.now)
			require.NoError(t, b.r.HandBack(b.ctx, finishArgsOf(ct, b.now), testSettings))
			b.claimAt(t, b.now)
			_, _, err := b.r.CancelTask(b.ctx, "q", id, testAdmin, b.now, "stop")
			require.NoError(t, err)
			return id
		},
		full:     []string{"TASK_QUEUED", "TASK_STARTED", "TASK_QUEUED", "TASK_STARTED", "TASK_CANCEL_REQUESTED"},
		outcomes: []string{"TASK_QUEUED", "TASK_CANCEL_REQUESTED"},
	}, {
		name: "dead letter, DLQ requeue",
		run: func(t *testing.T, b *testRDB) string {
			id := b.submit(t, func(nt *NewTask) { nt.MaxAttempts = 1 })
			ct := b.claimAt(t, b.now)
			require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(ct, b.now), testSettings, "Boom", "boom", false))
			_, err := b.r.DLQRequeue(b.ctx, "q", id, testAdmin, b.now, time.Time{})
			require.NoError(t, err)
			return id
		},
		full:     []string{"TASK_QUEUED", "TASK_STARTED", "TASK_DEAD_LETTERED", "TASK_QUEUED"},
		outcomes: []string{"TASK_DEAD_LETTERED", "TASK_QUEUED"},
	}}
	for _, tc := range cases {
		for _, mode := range []string{"", dtqtype.EventsFull, dtqtype.EventsOutcomes} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				b := eventsRDB(t, mode, tc.limits)
				id := tc.run(t, b)
				want := tc.full
				if mode == dtqtype.EventsOutcomes {
					want = tc.outcomes
				}
				require.Equal(t, want, b.eventTypes(t, "q", id))
			})
		}
	}
}

// TestEventDetailSettingReadBack: events "outcomes" is stored with the
// limits and read back; "full" is the default, stored as nothing; a later
// SetLimits without it, or DeleteLimits, goes back to full.
func TestEventDetailSettingReadBack(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	cases := []struct {
		name string
		set  *dtqtype.QueueLimits
		want *dtqtype.QueueLimits
	}{
		{"outcomes alone", &dtqtype.QueueLimits{Events: dtqtype.EventsOutcomes}, &dtqtype.QueueLimits{Events: dtqtype.EventsOutcomes}},
		{"with a limit", &dtqtype.QueueLimits{Concurrency: 3, Events: dtqtype.EventsOutcomes},
			&dtqtype.QueueLimits{Concurrency: 3, Events: dtqtype.EventsOutcomes}},
		{"limits without it", &dtqtype.QueueLimits{Concurrency: 3}, &dtqtype.QueueLimits{Concurrency: 3}},
		{"full alone", &dtqtype.QueueLimits{Events: dtqtype.EventsFull}, nil},
		{"deleted", nil, nil},
	}
	for _, tc := range cases {
		_, err := b.r.SetLimits(b.ctx, "q", tc.set)
		require.NoError(t, err, tc.name)
		got, err := b.r.GetLimits(b.ctx, "q")
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
		require.Equal(t, tc.want != nil && tc.want.Events == dtqtype.EventsOutcomes, b.r.outcomesOnly(b.ctx, "q"),
			"%s: the writer's own view is the new one", tc.name)
	}
}

// TestEventDetailOfAnotherProcess: a process that had not read the queue's
// flags reads the setting on its first submission.
func TestEventDetailOfAnotherProcess(t *testing.T) {
	t.Parallel()
	b := eventsRDB(t, dtqtype.EventsOutcomes, nil)
	b.r = New(b.c, b.keys.Prefix())
	id := b.submit(t, nil)
	require.Empty(t, b.eventTypes(t, "q", id))
	require.True(t, b.r.outcomesOnly(b.ctx, "q"))
}

// TestEventDetailWorkflowRelease: a workflow node released to run writes
// TASK_QUEUED with "full" and no event with "outcomes"; its success is
// recorded either way.
func TestEventDetailWorkflowRelease(t *testing.T) {
	t.Parallel()
	cases := []struct {
		mode string
		want []string
	}{
		{dtqtype.EventsFull, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"}},
		{dtqtype.EventsOutcomes, []string{"TASK_SUCCEEDED"}},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			b := eventsRDB(t, tc.mode, nil)
			nodes := []WorkflowNode{b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "b", false, "a")}
			id := NewWorkflowID(b.now, RandomWorkflowTag())
			st := b.submitWorkflow(t, &NewWorkflow{ID: id, Nodes: nodes})
			b.release(t, id, st.Releases)
			for _, n := range nodes {
				ct := b.claimAt(t, b.now)
				require.Equal(t, n.Task.ID, ct.ID)
				errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
				require.NoError(t, err)
				require.NoError(t, errs[0])
				b.relay(t, "q")
			}
			for _, n := range nodes {
				require.Equal(t, tc.want, b.eventTypes(t, "q", n.Task.ID), n.Ref)
			}
		})
	}
}
