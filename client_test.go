package dtq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/rdbtest"
	"github.com/dtq-io/dtq/internal/redistest"
)

type bundle struct {
	ctx    context.Context
	rc     *redis.Client
	prefix string
	keys   rdb.Keys
	d      *dtq.Deployment
	client *dtq.Client
	insp   *dtq.Inspector
	cfg    *dtq.ClientConfig
}

func setup(t *testing.T, mod func(*dtq.ClientConfig)) *bundle {
	t.Helper()
	return setupDeployment(t, nil, mod)
}

// setupDeployment is setup with the deployment settings that dmod sets.
func setupDeployment(t *testing.T, dmod func(*dtq.DeploymentConfig), mod func(*dtq.ClientConfig)) *bundle {
	t.Helper()
	s := redistest.New(t)
	redistest.CheckSlots(t, s.Client, rdb.HashSlot) // every script call must stay in one Cluster slot
	b := &bundle{ctx: context.Background(), rc: s.Client, prefix: s.Prefix, keys: rdb.NewKeys(s.Prefix), cfg: &dtq.ClientConfig{}}
	b.d = b.open(t, dmod)
	if mod != nil {
		mod(b.cfg)
	}
	c, err := b.d.NewClient(b.cfg)
	require.NoError(t, err)
	b.client, b.insp = c, b.d.Inspector()
	return b
}

// openPrefix opens the deployment of rc under prefix with the default
// settings.
var openPrefix = rdbtest.Open

// open returns the Deployment of b's Redis and key prefix with the
// settings that mod sets (nil: the defaults): another process's view, with
// its own clock for instance.
func (b *bundle) open(t *testing.T, mod func(*dtq.DeploymentConfig)) *dtq.Deployment {
	t.Helper()
	if mod == nil {
		return rdbtest.Open(t, b.rc, b.prefix)
	}
	return rdbtest.Open(t, b.rc, b.prefix, mod)
}

func (b *bundle) keyCount(t *testing.T) int {
	t.Helper()
	ks, err := redistest.Keys(b.ctx, redistest.Shared(t).AdminClient(t), b.prefix)
	require.NoError(t, err)
	return len(ks)
}

func TestSubmitCreatesQueuedTask(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "emails", Type: "send_receipt", Payload: map[string]any{"order_id": 42}})
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	require.Len(t, res.TaskID, 32)
	require.Equal(t, dtqtype.StatusQueued, res.Task.Status)

	got, err := b.insp.GetTask(b.ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, "emails", got.Queue)
	require.Equal(t, "send_receipt", got.Type)
	require.JSONEq(t, `{"order_id":42}`, string(got.Payload))
	require.Equal(t, 5, got.Priority)
	require.Equal(t, 5, got.MaxAttempts)
	require.Equal(t, 1, got.Attempt)
	require.Equal(t, int64(30000), got.TimeoutMS)
	require.Nil(t, got.IdempotencyKey)
	require.Equal(t, res.Task.CreatedAt, got.CreatedAt)

	// Stream entry carries id, attempt and payload while queued, and what
	// the claim needs of the task (c: created_at only when it is not the
	// time in the id); depth counts it; one event.
	created := ""
	if ms := res.Task.CreatedAt.UnixMilli(); rdb.TaskIDTime(res.TaskID).UnixMilli() != ms {
		created = strconv.FormatInt(ms, 10)
	}
	entries, err := b.rc.XRange(b.ctx, b.keys.Stream("emails", 5), "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, map[string]any{"t": res.TaskID, "a": "1", "p": `{"order_id":42}`,
		"c": "send_receipt\t30000\t5\t" + created + "\t\t"}, entries[0].Values)
	require.Equal(t, "1", b.rc.Get(b.ctx, b.keys.Depth("emails")).Val())
	evs, err := b.rc.XRange(b.ctx, b.keys.Events("emails"), "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, "TASK_QUEUED", evs[0].Values["type"])
	// No TTL on a live task hash.
	require.Equal(t, time.Duration(-1), b.rc.TTL(b.ctx, b.keys.Task("emails", res.TaskID)).Val())
}

func TestSubmitDelayedGoesToSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "echo", Delay: time.Minute, IdempotencyKey: "d1"})
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusPending, res.Task.Status)
	score, err := b.rc.ZScore(b.ctx, b.keys.Schedule("default"), res.TaskID).Result()
	require.NoError(t, err)
	require.Equal(t, float64(res.Task.AvailableAt.UnixMilli()), score)
	require.Zero(t, b.rc.XLen(b.ctx, b.keys.Stream("default", 5)).Val())
	// The record outlives the delay.
	ttl := b.rc.TTL(b.ctx, b.keys.Idempotency("default", "d1")).Val()
	require.Greater(t, ttl, 24*time.Hour)
	require.LessOrEqual(t, ttl, 24*time.Hour+time.Minute)
}

func TestTaskIDRoutesToQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "a", Type: "x"})
	require.NoError(t, err)
	c, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "c", Type: "x"})
	require.NoError(t, err)
	na, _ := rdb.ParseTaskID(a.TaskID)
	nc, _ := rdb.ParseTaskID(c.TaskID)
	require.NotEqual(t, na, nc)
	got, err := b.insp.GetTask(b.ctx, c.TaskID)
	require.NoError(t, err)
	require.Equal(t, "c", got.Queue)
	_, err = b.insp.GetTask(b.ctx, "0190a5c4e2c07000800000000000ffff")
	require.ErrorIs(t, err, dtq.ErrTaskNotFound)
}

func TestConcurrentSubmitsMergeAndAllLand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		linger time.Duration
	}{
		{"default linger", 0},
		{"never waiting", -1},
		{"longest linger", dtq.MaxSubmitLinger},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			concurrentSubmitsAllLand(t, setup(t, func(c *dtq.ClientConfig) { c.SubmitLinger = tc.linger }))
		})
	}
}

func TestSubmitLingerIsBounded(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	_, err := openPrefix(t, s.Client, s.Prefix).NewClient(&dtq.ClientConfig{SubmitLinger: dtq.MaxSubmitLinger + 1})
	require.ErrorContains(t, err, "SubmitLinger")
}

// concurrentSubmitsAllLand submits 300 tasks at once: each gets an id of
// its own, and each is counted and announced once.
func concurrentSubmitsAllLand(t *testing.T, b *bundle) {
	t.Helper()
	var wg sync.WaitGroup
	ids := make([]string, 300)
	errs := make([]error, 300)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "bulk", Type: "echo", Priority: new(i % 10)})
			errs[i] = err
			if err == nil {
				ids[i] = r.TaskID
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range ids {
		require.NoError(t, errs[i])
		require.False(t, seen[ids[i]])
		seen[ids[i]] = true
	}
	require.Equal(t, "300", b.rc.Get(b.ctx, b.keys.Depth("bulk")).Val())
	require.EqualValues(t, 300, b.rc.XLen(b.ctx, b.keys.Events("bulk")).Val())
}

func TestListTasksNewestFirstWithCursor(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var want []string
	for i := range 7 {
		q := []string{"l1", "l2"}[i%2]
		typ := []string{"even", "odd"}[i%2]
		r, err := b.client.Submit(b.ctx, dtq.Submission{Queue: q, Type: typ})
		require.NoError(t, err)
		want = append([]string{r.TaskID}, want...)
	}
	var got []string
	cursor := ""
	for {
		res, err := b.insp.ListTasks(b.ctx, &dtq.TaskListParams{Limit: 3, Cursor: cursor})
		require.NoError(t, err)
		for _, it := range res.Items {
			got = append(got, it.ID)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	require.Equal(t, want, got)

	all, err := b.insp.ListTasks(b.ctx, nil)
	require.NoError(t, err)
	require.Len(t, all.Items, 7, "nil params: every task, 50 a page")
	require.Empty(t, all.NextCursor)
	res, err := b.insp.ListTasks(b.ctx, &dtq.TaskListParams{Type: "odd"})
	require.NoError(t, err)
	require.Len(t, res.Items, 3)
	res, err = b.insp.ListTasks(b.ctx, &dtq.TaskListParams{Queue: "l1", Status: dtqtype.StatusQueued})
	require.NoError(t, err)
	require.Len(t, res.Items, 4)
	_, err = b.insp.ListTasks(b.ctx, &dtq.TaskListParams{Status: "bogus"})
	require.ErrorIs(t, err, dtq.ErrInvalidTask)
	_, err = b.insp.ListTasks(b.ctx, &dtq.TaskListParams{Cursor: "zzz"})
	require.ErrorIs(t, err, dtq.ErrInvalidCursor)
}

func TestValidationWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dtq.ClientConfig) { c.MaxPayloadBytes = 64 })
	_, err := b.client.Submit(b.ctx, dtq.Submission{Type: "ok"}) // registers the queue
	require.NoError(t, err)
	before := b.keyCount(t)
	cases := []struct {
		s     dtq.Submission
		field string
		kind  error
	}{
		{dtq.Submission{}, "task_type", dtq.ErrInvalidTask},
		{dtq.Submission{Type: "bad type"}, "task_type", dtq.ErrInvalidTask},
		{dtq.Submission{Type: "x", Queue: "Bad"}, "queue", dtq.ErrInvalidTask},
		{dtq.Submission{Type: "x", Priority: new(10)}, "priority", dtq.ErrInvalidTask},
		{dtq.Submission{Type: "x", MaxAttempts: 11}, "max_attempts", dtq.ErrInvalidTask},
		{dtq.Submission{Type: "x", Timeout: 2 * time.Hour}, "timeout_ms", dtq.ErrInvalidTask},
		{dtq.Submission{Type: "x", Payload: json.RawMessage(`[1]`)}, "payload", dtq.ErrInvalidTask},
		{dtq.Submission{Type: "x", Payload: map[string]string{"a": string(make([]byte, 100))}}, "payload", dtq.ErrPayloadTooLarge},
		{dtq.Submission{Type: "x", TTL: time.Second, Delay: time.Minute}, "ttl_seconds", dtq.ErrInvalidTask},
		{dtq.Submission{Type: "x", IdempotencyKey: "a\x01"}, "idempotency_key", dtq.ErrInvalidTask},
	}
	for _, c := range cases {
		_, err := b.client.Submit(b.ctx, c.s)
		var ve *dtq.ValidationError
		require.ErrorAs(t, err, &ve, "%+v", c.s)
		require.Equal(t, c.field, ve.Field)
		require.ErrorIs(t, err, c.kind)
	}
	require.Equal(t, before, b.keyCount(t))
}

func TestQueueFullWithRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dtq.ClientConfig) { c.MaxQueueDepth = 2 })
	for range 2 {
		_, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "small", Type: "x", Delay: time.Hour})
		require.NoError(t, err)
	}
	_, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "small", Type: "x"})
	var qf *dtq.QueueFullError
	require.ErrorAs(t, err, &qf)
	require.True(t, errors.Is(err, dtq.ErrQueueFull))
	require.EqualValues(t, 2, qf.Depth)
	require.EqualValues(t, 2, qf.Limit)
	require.GreaterOrEqual(t, qf.RetryAfter, time.Second)
	require.LessOrEqual(t, qf.RetryAfter, time.Minute)
}
