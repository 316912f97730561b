package dtq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// startOrder runs one worker with a single slot on queue and records the
// keys of the tasks in the order they start.
type startOrder struct {
	mu   sync.Mutex
	keys []string
}

func (s *startOrder) add(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, k)
}

func (s *startOrder) positions(key string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i, k := range s.keys {
		if k == key {
			out = append(out, i+1)
		}
	}
	return out
}

// payloadKey is the key submitN wrote into the task's payload.
func payloadKey(task *dtq.Task) string {
	return strings.TrimSuffix(strings.TrimPrefix(string(task.Payload), `{"key":"`), `"}`)
}

func (b *bundle) oneSlotWorker(t *testing.T, queue string, s *startOrder) {
	t.Helper()
	w := b.worker(t, func(c *dtq.WorkerConfig) {
		c.Queues = map[string]int{queue: 1}
		c.Concurrency = 1
	})
	w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
		s.add(payloadKey(task))
		return nil, nil
	})
	workertest.Run(t, w)
}

// TestFairnessLetsASmallKeyThrough is the reported case end to end: one
// worker slot, 300 tasks of key big, then 3 of key small. With fairness the
// small ones start within K = 2 starts each, not after the backlog.
func TestFairnessLetsASmallKeyThrough(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "tenants", dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}}))
	big := b.submitN(t, "tenants", "job", 300, func(int) string { return "big" })
	small := b.submitN(t, "tenants", "job", 3, func(int) string { return "small" })
	s := &startOrder{}
	b.oneSlotWorker(t, "tenants", s)
	b.waitAll(t, small, dtqtype.StatusSucceeded)
	b.waitAll(t, big, dtqtype.StatusSucceeded)
	pos := s.positions("small")
	t.Logf("the small key's tasks started at positions %v of 303", pos)
	require.Len(t, pos, 3)
	require.LessOrEqual(t, pos[2], 6, "each small task within 2 starts")
}

// TestKeyOrderFIFOEndToEnd: key_order fifo with key_concurrency 1 runs each
// key's tasks as a strict sequence across workers, while the keys share the
// workers.
func TestKeyOrderFIFOEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "ordered", dtqtype.QueueLimits{KeyOrder: "fifo", KeyConcurrency: 1}))
	keys := []string{"k1", "k2", "k3"}
	ids := b.submitN(t, "ordered", "job", 30, func(i int) string { return keys[i%3] })
	var mu sync.Mutex
	seen := map[string][]string{}
	for range 2 {
		w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"ordered": 1}; c.Concurrency = 4 })
		w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
			mu.Lock()
			seen[payloadKey(task)] = append(seen[payloadKey(task)], task.ID)
			mu.Unlock()
			return nil, nil
		})
		workertest.Run(t, w)
	}
	b.waitAll(t, ids, dtqtype.StatusSucceeded)
	for i, k := range keys {
		var want []string
		for j := i; j < len(ids); j += 3 {
			want = append(want, ids[j])
		}
		require.Equal(t, want, seen[k], "key %s in submission order", k)
	}
}

// TestFairnessLimitsAreValidated: every new field is bounded and named in
// its error; the limits read back as set, with the top keys on the queue.
func TestFairnessLimitsAreValidated(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	sec := dtqtype.Duration(time.Second)
	for _, tc := range []struct {
		field string
		l     dtqtype.QueueLimits
	}{
		{"fairness.default_weight", dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{DefaultWeight: 1001}}},
		{"fairness.weights", dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{Weights: map[string]int{"a": 0}}}},
		{"fairness.weights", dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{Weights: map[string]int{"a b": 2}}}},
		{"key_rate.limit", dtqtype.QueueLimits{KeyRate: &dtqtype.RateLimit{Limit: 0, Period: sec}}},
		{"key_rate.period", dtqtype.QueueLimits{KeyRate: &dtqtype.RateLimit{Limit: 1}}},
		{"key_rate.burst", dtqtype.QueueLimits{KeyRate: &dtqtype.RateLimit{Limit: 1, Period: sec, Burst: -1}}},
		{"key_order", dtqtype.QueueLimits{KeyOrder: "lifo"}},
	} {
		err := a.SetLimits(b.ctx, "checked", tc.l)
		var ve *dtq.ValidationError
		require.True(t, errors.As(err, &ve), "%s: %v", tc.field, err)
		require.Equal(t, tc.field, ve.Field)
	}
	want := dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{DefaultWeight: 2, Weights: map[string]int{"acme": 5}},
		KeyRate: &dtqtype.RateLimit{Limit: 2, Period: sec, Burst: 1}, KeyOrder: "fifo"}
	require.NoError(t, a.SetLimits(b.ctx, "checked", want))
	got, err := b.insp.GetLimits(b.ctx, "checked")
	require.NoError(t, err)
	require.Equal(t, &want, got)
	b.submitN(t, "checked", "job", 3, func(i int) string { return []string{"acme", "acme", "zed"}[i] })
	qi, err := b.insp.GetQueue(b.ctx, "checked")
	require.NoError(t, err)
	require.Equal(t, []dtqtype.KeyBacklog{{Key: "acme", Queued: 2}, {Key: "zed", Queued: 1}}, qi.TopKeys)
	require.EqualValues(t, 3, qi.ReadyTotal)
	require.EqualValues(t, 3, qi.Depth)
}

// TestFairnessWeightsEndToEnd: weights 3:1 give shares within ±5 % over the
// first 10,000 starts of a worker, both keys backlogged throughout.
func TestFairnessWeightsEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dtq.ClientConfig) { c.MaxQueueDepth = 30000 })
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "weighted", dtqtype.QueueLimits{
		Fairness: &dtqtype.Fairness{Weights: map[string]int{"heavy": 3}}}))
	for _, key := range []string{"heavy", "light"} {
		for done := 0; done < 10000; done += 1000 {
			subs := make([]dtq.Submission, 1000)
			for i := range subs {
				subs[i] = dtq.Submission{Queue: "weighted", Type: "job", ConcurrencyKey: key, Payload: map[string]string{"key": key}}
			}
			items, err := b.client.SubmitBatch(b.ctx, subs)
			require.NoError(t, err)
			for _, it := range items {
				require.NoError(t, it.Err)
			}
		}
	}
	var mu sync.Mutex
	count := map[string]int{}
	total := 0
	enough := make(chan struct{})
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"weighted": 1}; c.Concurrency = 8 })
	w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		if total < 10000 {
			count[payloadKey(task)]++
			if total++; total == 10000 {
				close(enough)
			}
		}
		return nil, nil
	})
	workertest.Run(t, w)
	<-enough
	mu.Lock()
	defer mu.Unlock()
	t.Logf("first 10000 starts: heavy %d, light %d", count["heavy"], count["light"])
	require.InDelta(t, 7500, count["heavy"], 375)
	require.InDelta(t, 2500, count["light"], 125)
}
