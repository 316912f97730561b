package dtq_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// idemRecord is what an idempotency key answers with: the record (the task
// id) and, from the task hash, the state and fingerprint.
type idemRecord struct {
	TaskID      string
	State       string // processing, completed or failed, from the task's status
	Fingerprint string
}

func (b *bundle) record(t *testing.T, queue, key string) (idemRecord, string) {
	t.Helper()
	raw, err := b.rc.Get(b.ctx, b.keys.Idempotency(queue, key)).Result()
	require.NoError(t, err, "record %s/%s", queue, key)
	v := b.rc.HMGet(b.ctx, b.keys.Task(queue, raw), "status", "fingerprint").Val()
	st, _ := v[0].(string)
	fp, _ := v[1].(string)
	rec := idemRecord{TaskID: raw, State: "processing", Fingerprint: fp}
	switch dtqtype.Status(st) {
	case dtqtype.StatusSucceeded:
		rec.State = "completed"
	case dtqtype.StatusFailed, dtqtype.StatusDeadLettered, dtqtype.StatusCancelled, dtqtype.StatusExpired:
		rec.State = "failed"
	}
	return rec, raw
}

func mustRecord(t *testing.T, b *bundle, queue, key string) idemRecord {
	t.Helper()
	rec, _ := b.record(t, queue, key)
	return rec
}

// finishRecord ends the record's task in state ("completed" or "failed"),
// as a worker's finalize would: the record's state is its task's status.
func (b *bundle) finishRecord(t *testing.T, queue, key, state string) {
	t.Helper()
	rec, _ := b.record(t, queue, key)
	status := map[string]string{"completed": "succeeded", "failed": "failed"}[state]
	require.NotEmpty(t, status, state)
	require.NoError(t, b.rc.HSet(b.ctx, b.keys.Task(queue, rec.TaskID), "status", status).Err())
}

// queueState is everything a submission could change in a queue.
type queueState struct {
	events, recent, schedule, ready int64
	depth                           string
}

func (b *bundle) queueState(t *testing.T, queue string) queueState {
	t.Helper()
	s := queueState{
		events:   b.rc.XLen(b.ctx, b.keys.Events(queue)).Val(),
		recent:   b.rc.LLen(b.ctx, b.keys.Recent(queue)).Val(),
		schedule: b.rc.ZCard(b.ctx, b.keys.Schedule(queue)).Val(),
		depth:    b.rc.Get(b.ctx, b.keys.Depth(queue)).Val(),
	}
	for band := range rdb.NumBands {
		s.ready += b.rc.XLen(b.ctx, b.keys.Stream(queue, band)).Val()
	}
	return s
}

func requireConflict(t *testing.T, err error, kind error, taskID string) {
	t.Helper()
	require.ErrorIs(t, err, kind)
	var ce *dtq.IdempotencyConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, taskID, ce.TaskID)
}

func TestIdempotencyRecord(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Millisecond)
	b := setupDeployment(t, func(c *dtq.DeploymentConfig) {
		c.IdempotencyTTL = 2 * time.Hour
		c.Clock = func() time.Time { return now }
	}, nil)
	cases := []struct {
		name string
		s    dtq.Submission
		ttl  time.Duration // the record's expected TTL
	}{
		{"queued", dtq.Submission{}, 2 * time.Hour},
		{"delayed", dtq.Submission{Delay: 90 * time.Second}, 2*time.Hour + 90*time.Second},
		{"delay rounds up to a second", dtq.Submission{Delay: 1500 * time.Millisecond}, 2*time.Hour + 2*time.Second},
		{"run_at ahead", dtq.Submission{RunAt: now.Add(10 * time.Minute)}, 2*time.Hour + 10*time.Minute},
		{"run_at passed", dtq.Submission{RunAt: now.Add(-time.Hour)}, 2 * time.Hour},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			s.Queue, s.Type, s.IdempotencyKey = "rec", "echo", fmt.Sprintf("key-%d", i)
			res, err := b.client.Submit(b.ctx, s)
			require.NoError(t, err)
			require.False(t, res.Duplicate)
			require.Equal(t, s.IdempotencyKey, *res.Task.IdempotencyKey)

			rec, raw := b.record(t, "rec", s.IdempotencyKey)
			require.Equal(t, res.TaskID, raw, "the record is the task id")
			require.Equal(t, "processing", rec.State)
			require.Len(t, rec.Fingerprint, 32, "a SHA-256, stored as its 32 bytes")

			ttl := b.rc.TTL(b.ctx, b.keys.Idempotency("rec", s.IdempotencyKey)).Val()
			require.LessOrEqual(t, ttl, c.ttl)
			require.Greater(t, ttl, c.ttl-3*time.Second)
		})
	}
}

func TestIdempotencyReplayIsReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	s := dtq.Submission{Queue: "ro", Type: "echo", Payload: map[string]int{"n": 1}, IdempotencyKey: "k"}
	first, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)
	recKey := b.keys.Idempotency("ro", "k")
	// A distinctive TTL shows whether anything refreshes the record.
	require.NoError(t, b.rc.Expire(b.ctx, recKey, 777*time.Second).Err())
	before := b.queueState(t, "ro")
	_, rawBefore := b.record(t, "ro", "k")

	_, err = b.client.Submit(b.ctx, s)
	requireConflict(t, err, dtq.ErrIdempotencyInProgress, first.TaskID)
	require.Equal(t, before, b.queueState(t, "ro"))
	_, raw := b.record(t, "ro", "k")
	require.Equal(t, rawBefore, raw)

	b.finishRecord(t, "ro", "k", "completed")
	_, rawBefore = b.record(t, "ro", "k")
	res, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	require.Equal(t, first.TaskID, res.TaskID)
	require.Equal(t, before, b.queueState(t, "ro"), "a replay writes nothing")
	_, raw = b.record(t, "ro", "k")
	require.Equal(t, rawBefore, raw)
	ttl := b.rc.TTL(b.ctx, recKey).Val()
	require.LessOrEqual(t, ttl, 777*time.Second)
	require.Greater(t, ttl, 770*time.Second)
}

func TestIdempotencyInProgress(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	s := dtq.Submission{Queue: "ip", Type: "echo", IdempotencyKey: "order-1"}
	first, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)
	res, err := b.client.Submit(b.ctx, s)
	require.Nil(t, res)
	requireConflict(t, err, dtq.ErrIdempotencyInProgress, first.TaskID)
	require.NotErrorIs(t, err, dtq.ErrIdempotencyKeyMismatch)
	var ce *dtq.IdempotencyConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "ip", ce.Queue)
	require.Equal(t, "order-1", ce.Key)
}

func TestIdempotencyReplayOfFinishedTask(t *testing.T) {
	t.Parallel()
	cases := []struct {
		state  string // record state
		status dtqtype.Status
		result string // "" = no result key
	}{
		{"completed", dtqtype.StatusSucceeded, `{"receipt":"r-1"}`},
		{"failed", dtqtype.StatusDeadLettered, ""},
		{"failed", dtqtype.StatusCancelled, ""},
	}
	for _, c := range cases {
		t.Run(string(c.status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			s := dtq.Submission{Queue: "fin", Type: "charge", Payload: json.RawMessage(`{"amount":10}`), IdempotencyKey: "k"}
			first, err := b.client.Submit(b.ctx, s)
			require.NoError(t, err)
			// Ended as a run would end it: the claim moved the payload from
			// the stream entry into the hash (internal/rdb's
			// TestReplayOfCancelledQueuedTaskHasPayload ends one for real).
			taskKey := b.keys.Task("fin", first.TaskID)
			require.NoError(t, b.rc.HSet(b.ctx, taskKey, "status", string(c.status), "payload", `{"amount":10}`).Err())
			if c.result != "" {
				require.NoError(t, b.rc.Set(b.ctx, b.keys.Result("fin", first.TaskID), c.result, time.Hour).Err())
			}
			rec, _ := b.record(t, "fin", "k")
			require.Equal(t, c.state, rec.State)

			res, err := b.client.Submit(b.ctx, s)
			require.NoError(t, err)
			require.True(t, res.Duplicate)
			require.Equal(t, first.TaskID, res.TaskID)
			require.Equal(t, first.TaskID, res.Task.ID)
			require.Equal(t, c.status, res.Task.Status)
			require.Equal(t, "charge", res.Task.Type)
			require.JSONEq(t, `{"amount":10}`, string(res.Task.Payload))
			require.Equal(t, first.Task.CreatedAt, res.Task.CreatedAt)
			if c.result != "" {
				require.JSONEq(t, c.result, string(res.Task.Result))
			} else {
				require.Nil(t, res.Task.Result)
			}
		})
	}
}

func TestIdempotencyStaleRecordStartsNewTask(t *testing.T) {
	t.Parallel()
	b := setupDeployment(t, func(c *dtq.DeploymentConfig) { c.IdempotencyTTL = time.Hour }, nil)
	s := dtq.Submission{Queue: "stale", Type: "echo", IdempotencyKey: "k"}
	first, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)
	b.finishRecord(t, "stale", "k", "completed")
	recKey := b.keys.Idempotency("stale", "k")
	require.NoError(t, b.rc.Expire(b.ctx, recKey, 100*time.Second).Err())
	// Retention removed the task; the record outlived it.
	require.NoError(t, b.rc.Del(b.ctx, b.keys.Task("stale", first.TaskID)).Err())

	s.Payload = map[string]string{"changed": "yes"} // a stale record is no mismatch
	res, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	require.NotEqual(t, first.TaskID, res.TaskID)
	rec, _ := b.record(t, "stale", "k")
	require.Equal(t, res.TaskID, rec.TaskID)
	require.Equal(t, "processing", rec.State)
	require.Greater(t, b.rc.TTL(b.ctx, recKey).Val(), 59*time.Minute, "the replaced record gets a fresh TTL")

	_, err = b.client.Submit(b.ctx, s)
	requireConflict(t, err, dtq.ErrIdempotencyInProgress, res.TaskID)
}

// TestIdempotencyFingerprint submits a base request and then a variant with
// the same key: a variant that asks for the same work is in progress, one
// that asks for different work is a mismatch.
func TestIdempotencyFingerprint(t *testing.T) {
	t.Parallel()
	runAt := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	base := dtq.Submission{Queue: "fp", Type: "charge", Payload: json.RawMessage(`{"amount":10,"currency":"EUR"}`)}
	with := func(f func(s *dtq.Submission)) dtq.Submission {
		s := base
		f(&s)
		return s
	}
	cases := []struct {
		name     string
		base     dtq.Submission
		variant  dtq.Submission
		mismatch bool
	}{
		{"identical", base, base, false},
		{"payload key order", base, with(func(s *dtq.Submission) { s.Payload = json.RawMessage(`{"currency":"EUR","amount":10}`) }), false},
		{"payload whitespace", base, with(func(s *dtq.Submission) { s.Payload = json.RawMessage(" {\n\"amount\" : 10, \"currency\":\"EUR\"}\n") }), false},
		{"payload string escapes", base, with(func(s *dtq.Submission) { s.Payload = json.RawMessage(`{"amount":10,"currency":"\u0045UR"}`) }), false},
		{"payload as a map", base, with(func(s *dtq.Submission) { s.Payload = map[string]any{"currency": "EUR", "amount": 10} }), false},
		{"explicit defaults", base, with(func(s *dtq.Submission) {
			s.Priority, s.MaxAttempts, s.Timeout = new(5), 5, 30*time.Second
		}), false},
		{"metadata", base, with(func(s *dtq.Submission) { s.Metadata = map[string]string{"trace": "other"} }), false},
		{"metadata ttl_seconds", base, with(func(s *dtq.Submission) { s.Metadata = map[string]int{"ttl_seconds": 60} }), false},
		{"nil and empty payload", with(func(s *dtq.Submission) { s.Payload = nil }), with(func(s *dtq.Submission) { s.Payload = json.RawMessage(`{}`) }), false},

		{"payload value", base, with(func(s *dtq.Submission) { s.Payload = json.RawMessage(`{"amount":11,"currency":"EUR"}`) }), true},
		{"payload extra field", base, with(func(s *dtq.Submission) { s.Payload = json.RawMessage(`{"amount":10,"currency":"EUR","x":null}`) }), true},
		// Numbers are compared as written, never as floats.
		{"number spelling", base, with(func(s *dtq.Submission) { s.Payload = json.RawMessage(`{"amount":10.0,"currency":"EUR"}`) }), true},
		{"task type", base, with(func(s *dtq.Submission) { s.Type = "refund" }), true},
		{"priority", base, with(func(s *dtq.Submission) { s.Priority = new(6) }), true},
		{"max attempts", base, with(func(s *dtq.Submission) { s.MaxAttempts = 3 }), true},
		{"timeout", base, with(func(s *dtq.Submission) { s.Timeout = time.Second }), true},
		{"delay", base, with(func(s *dtq.Submission) { s.Delay = time.Minute }), true},
		{"run_at", with(func(s *dtq.Submission) { s.RunAt = runAt }), with(func(s *dtq.Submission) { s.RunAt = runAt.Add(time.Millisecond) }), true},
		{"run_at against delay", with(func(s *dtq.Submission) { s.Delay = time.Hour }), with(func(s *dtq.Submission) { s.RunAt = runAt }), true},
		{"ttl", base, with(func(s *dtq.Submission) { s.TTL = time.Hour }), true},
		{"expires_at", base, with(func(s *dtq.Submission) { s.ExpiresAt = runAt }), true},
	}
	b := setup(t, nil)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := fmt.Sprintf("key-%d", i)
			c.base.IdempotencyKey, c.variant.IdempotencyKey = key, key
			first, err := b.client.Submit(b.ctx, c.base)
			require.NoError(t, err)
			_, err = b.client.Submit(b.ctx, c.variant)
			if c.mismatch {
				requireConflict(t, err, dtq.ErrIdempotencyKeyMismatch, first.TaskID)
			} else {
				requireConflict(t, err, dtq.ErrIdempotencyInProgress, first.TaskID)
			}
		})
	}
}

// TestIdempotencyFingerprintIgnoresMetadata compares the stored fingerprints
// of requests that differ only in metadata, under different keys.
func TestIdempotencyFingerprintIgnoresMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var fps []string
	for i, meta := range []any{nil, map[string]string{"trace": "a"}, json.RawMessage(`{"trace":"b","tenant":7}`)} {
		key := fmt.Sprintf("m%d", i)
		_, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "meta", Type: "echo", Payload: map[string]int{"a": 1, "b": 2}, Metadata: meta, IdempotencyKey: key})
		require.NoError(t, err)
		rec, _ := b.record(t, "meta", key)
		fps = append(fps, rec.Fingerprint)
	}
	require.Equal(t, fps[0], fps[1])
	require.Equal(t, fps[0], fps[2])

	_, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "meta", Type: "echo", Payload: json.RawMessage(`{"b":2,"a":1}`), IdempotencyKey: "order"})
	require.NoError(t, err)
	rec, _ := b.record(t, "meta", "order")
	require.Equal(t, fps[0], rec.Fingerprint, `{"a":1,"b":2} and {"b":2,"a":1} are the same work`)
}

func TestIdempotencyScopeIsPerQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "qa", Type: "echo", IdempotencyKey: "shared"})
	require.NoError(t, err)
	c, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "qb", Type: "echo", IdempotencyKey: "shared"})
	require.NoError(t, err)
	require.False(t, c.Duplicate)
	require.NotEqual(t, a.TaskID, c.TaskID)
	recA, _ := b.record(t, "qa", "shared")
	recB, _ := b.record(t, "qb", "shared")
	require.Equal(t, a.TaskID, recA.TaskID)
	require.Equal(t, c.TaskID, recB.TaskID)
}

func TestIdempotencyQuotedKey(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	first, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "quoted", Type: "echo", IdempotencyKey: "abc"})
	require.NoError(t, err)
	_, err = b.client.Submit(b.ctx, dtq.Submission{Queue: "quoted", Type: "echo", IdempotencyKey: `"abc"`})
	requireConflict(t, err, dtq.ErrIdempotencyInProgress, first.TaskID)

	res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "quoted", Type: "echo", IdempotencyKey: `"a\"b\\c"`})
	require.NoError(t, err)
	require.Equal(t, `a"b\c`, *res.Task.IdempotencyKey)
	rec, _ := b.record(t, "quoted", `a"b\c`)
	require.Equal(t, res.TaskID, rec.TaskID)
	require.Zero(t, b.rc.Exists(b.ctx, b.keys.Idempotency("quoted", `"abc"`)).Val())
}

func TestIdempotencySubmitBatchSameKeyTwice(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	s := dtq.Submission{Queue: "batch", Type: "echo", Payload: map[string]int{"n": 1}, IdempotencyKey: "k"}
	other := s
	other.Payload = map[string]int{"n": 2}
	items, err := b.client.SubmitBatch(b.ctx, []dtq.Submission{s, s, other})
	require.NoError(t, err)
	require.Len(t, items, 3)
	require.NoError(t, items[0].Err)
	require.False(t, items[0].Result.Duplicate)
	id := items[0].Result.TaskID
	requireConflict(t, items[1].Err, dtq.ErrIdempotencyInProgress, id)
	requireConflict(t, items[2].Err, dtq.ErrIdempotencyKeyMismatch, id)
	require.Equal(t, "1", b.rc.Get(b.ctx, b.keys.Depth("batch")).Val())
}

func TestIdempotencyConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// Several clients, so that duplicates also race across script calls and
	// not only inside one merged call.
	clients := []*dtq.Client{b.client}
	for range 3 {
		c, err := b.d.NewClient(b.cfg)
		require.NoError(t, err)
		clients = append(clients, c)
	}
	const n = 200
	results := make([]*dtq.SubmitResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = clients[i%len(clients)].Submit(b.ctx,
				dtq.Submission{Queue: "race", Type: "charge", Payload: map[string]int{"amount": 5}, IdempotencyKey: "pay-1"})
		}()
	}
	close(start)
	wg.Wait()

	created := ""
	for i := range n {
		if errs[i] == nil && !results[i].Duplicate {
			require.Empty(t, created, "a second task was created")
			created = results[i].TaskID
		}
	}
	require.NotEmpty(t, created)
	for i := range n {
		if errs[i] == nil {
			require.Equal(t, created, results[i].TaskID)
		} else {
			requireConflict(t, errs[i], dtq.ErrIdempotencyInProgress, created)
		}
	}

	keys, err := redistest.Keys(b.ctx, redistest.Shared(t).AdminClient(t), b.prefix)
	require.NoError(t, err)
	var hashes []string
	for _, k := range keys {
		if strings.HasPrefix(k, b.keys.TaskPrefix("race")) {
			hashes = append(hashes, k)
		}
	}
	require.Equal(t, []string{b.keys.Task("race", created)}, hashes)
	st := b.queueState(t, "race")
	require.Equal(t, queueState{events: 1, recent: 1, ready: 1, depth: "1"}, st)
	evs := b.rc.XRange(b.ctx, b.keys.Events("race"), "-", "+").Val()
	require.Equal(t, "TASK_QUEUED", evs[0].Values["type"])
	require.Equal(t, created, evs[0].Values["task_id"])
}

func TestIdempotencyReplayWhenQueueFull(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dtq.ClientConfig) { c.MaxQueueDepth = 1 })
	s := dtq.Submission{Queue: "full", Type: "echo", IdempotencyKey: "k"}
	first, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)

	_, err = b.client.Submit(b.ctx, dtq.Submission{Queue: "full", Type: "echo", IdempotencyKey: "new"})
	require.ErrorIs(t, err, dtq.ErrQueueFull, "new work is gated")

	_, err = b.client.Submit(b.ctx, s)
	requireConflict(t, err, dtq.ErrIdempotencyInProgress, first.TaskID)

	b.finishRecord(t, "full", "k", "completed")
	res, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	require.Equal(t, first.TaskID, res.TaskID)

	// A stale record means new work, so the depth gate applies again.
	require.NoError(t, b.rc.Del(b.ctx, b.keys.Task("full", first.TaskID)).Err())
	_, err = b.client.Submit(b.ctx, s)
	require.ErrorIs(t, err, dtq.ErrQueueFull)
}

func TestIdempotencyRecordExpiryStartsNewWindow(t *testing.T) {
	t.Parallel()
	b := setupDeployment(t, func(c *dtq.DeploymentConfig) { c.IdempotencyTTL = time.Second }, nil)
	s := dtq.Submission{Queue: "short", Type: "echo", IdempotencyKey: "k"}
	first, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)
	recKey := b.keys.Idempotency("short", "k")
	require.Equal(t, time.Second, b.rc.TTL(b.ctx, recKey).Val())

	require.Eventually(t, func() bool {
		return b.rc.Exists(b.ctx, recKey).Val() == 0
	}, 10*time.Second, 20*time.Millisecond, "Redis never expired the record")

	res, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	require.NotEqual(t, first.TaskID, res.TaskID)
	rec, _ := b.record(t, "short", "k")
	require.Equal(t, res.TaskID, rec.TaskID)
}
