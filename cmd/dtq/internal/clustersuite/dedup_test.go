package clustersuite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// dedupReply is what one submission with a dedup key was told.
type dedupReply struct {
	status       int
	TaskID       string `json:"task_id"`
	Status       string `json:"status"`
	Deduplicated string `json:"deduplicated"`
	Replaced     string `json:"replaced_task_id"`
	DedupKey     string `json:"dedup_key"`
	Code         string `json:"code"`
}

func (a *api) submitDedup(t *testing.T, body string) dedupReply {
	t.Helper()
	status, raw := a.call(t, http.MethodPost, "/api/v1/tasks", body)
	var r dedupReply
	require.NoError(t, json.Unmarshal(raw, &r), "%s", raw)
	r.status = status
	return r
}

// TestDedupOnEveryMaster runs each mode's second submission on queues
// served by three masters (the key record, the task hashes, the waiting
// index and the counts must all be in the queue's slot), keep_last's
// waiting task released when the running one ends, and the release of a
// drop key at cancel.
func TestDedupOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("dedup")
	queues := queuesOnEveryMaster(t, c, prefix)
	a := startAPI(t, cc, prefix)
	var gates sync.Map // queue -> chan struct{}: a "hold" task runs until it closes
	startWorker(t, cc, prefix, queues, nil, map[string]dtq.HandlerFunc{
		"hold": func(ctx context.Context, task *dtq.Task) (any, error) {
			ch, _ := gates.Load(task.Queue)
			select {
			case <-ch.(chan struct{}):
			case <-ctx.Done():
			}
			return "held", nil
		},
	})
	keys := rdb.NewKeys(prefix)
	for _, q := range queues {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			// Second submissions while the first is queued on a paused queue
			// (the worker serves it, but takes nothing).
			status, raw := a.call(t, http.MethodPost, "/api/v1/queues/"+q+"/pause", "")
			require.Equal(t, http.StatusOK, status, string(raw))
			modes := []struct {
				dedup     string
				collapsed bool
				first     dtqtype.Status // the first task's status after the second
			}{
				{`{"key":"drop","mode":"drop"}`, true, dtqtype.StatusQueued},
				{`{"key":"throttle","mode":"throttle","ttl":"1h"}`, true, dtqtype.StatusQueued},
				{`{"key":"debounce","mode":"debounce","window":"1h"}`, true, dtqtype.StatusPending},
				{`{"key":"replace","mode":"replace"}`, false, dtqtype.StatusCancelled},
				{`{"key":"keep_last","mode":"keep_last"}`, false, dtqtype.StatusCancelled},
			}
			for _, m := range modes {
				body := func(v int) string {
					return fmt.Sprintf(`{"task_type":"work","queue":%q,"payload":{"v":%d},"dedup":%s}`, q, v, m.dedup)
				}
				first := a.submitDedup(t, body(1))
				require.Equal(t, http.StatusAccepted, first.status, "%s: %+v", m.dedup, first)
				second := a.submitDedup(t, body(2))
				ti, err := a.insp.GetTask(t.Context(), first.TaskID)
				require.NoError(t, err)
				require.Equal(t, m.first, ti.Status, m.dedup)
				if m.collapsed {
					require.Equal(t, http.StatusOK, second.status, m.dedup)
					require.Equal(t, first.TaskID, second.TaskID, "%s: collapsed into the first", m.dedup)
					require.NotEmpty(t, second.Deduplicated)
					continue
				}
				require.Equal(t, http.StatusAccepted, second.status, m.dedup)
				require.Equal(t, first.TaskID, second.Replaced, m.dedup)
				requireEvent(t, a, q, first.TaskID, "TASK_DEDUPLICATED")
			}
			qi, err := a.insp.GetQueue(t.Context(), q)
			require.NoError(t, err)
			require.Equal(t, map[string]int64{"drop": 1, "throttle": 1, "debounce": 1, "replace": 1, "keep_last": 1}, qi.Deduplicated)

			// Release at cancel: a cancelled drop task frees its key at once.
			drop := fmt.Sprintf(`{"task_type":"work","queue":%q,"dedup":{"key":"drop","mode":"drop"}}`, q)
			held := a.submitDedup(t, drop)
			require.Equal(t, http.StatusOK, held.status)
			status, raw = a.call(t, http.MethodPost, "/api/v1/tasks/"+held.TaskID+"/cancel", "")
			require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, status, string(raw))
			require.Zero(t, cc.Exists(t.Context(), keys.Dedup(q, "drop")).Val(), "the cancel released the key")
			fresh := a.submitDedup(t, drop)
			require.Equal(t, http.StatusAccepted, fresh.status)
			require.NotEqual(t, held.TaskID, fresh.TaskID)
			status, raw = a.call(t, http.MethodPost, "/api/v1/tasks/"+fresh.TaskID+"/cancel", "")
			require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, status, string(raw))

			// keep_last: one runs, the next waits, and starts once it ends.
			gate := make(chan struct{})
			gates.Store(q, gate)
			status, raw = a.call(t, http.MethodPost, "/api/v1/queues/"+q+"/resume", "")
			require.Equal(t, http.StatusOK, status, string(raw))
			kl := func(v int) string {
				return fmt.Sprintf(`{"task_type":"hold","queue":%q,"payload":{"v":%d},"dedup":{"key":"kl","mode":"keep_last"}}`, q, v)
			}
			running := a.submitDedup(t, kl(1))
			require.Equal(t, http.StatusAccepted, running.status)
			a.waitStatus(t, running.TaskID, dtqtype.StatusRunning)
			waiting := a.submitDedup(t, kl(2))
			require.Equal(t, http.StatusAccepted, waiting.status)
			require.Equal(t, "waiting", waiting.Status)
			require.Empty(t, waiting.Replaced, "the running task is not replaced")
			last := a.submitDedup(t, kl(3))
			require.Equal(t, waiting.TaskID, last.Replaced, "the waiting one gives way")
			require.Equal(t, "waiting", last.Status)
			a.waitStatus(t, waiting.TaskID, dtqtype.StatusCancelled)
			close(gate)
			a.waitStatus(t, running.TaskID, dtqtype.StatusSucceeded)
			a.waitStatus(t, last.TaskID, dtqtype.StatusSucceeded)
			require.Zero(t, cc.Exists(t.Context(), keys.Dedup(q, "kl")).Val(), "the key is free once its last task ended")
			require.Zero(t, cc.ZCard(t.Context(), keys.Waiting(q)).Val())
		})
	}
}

// TestDedupAcrossFailover submits drop-mode tasks on a few keys of queues
// on every master of a cluster with one replica each (DTQ_REPLICA_ACKS=1)
// while the master of the first queue is killed and its replica takes
// over. Every sure answer must be true afterwards: a created task exists
// with its key, a collapsed answer names a task of its key; no key has two
// live tasks; and every task ends.
func TestDedupAcrossFailover(t *testing.T) {
	t.Parallel()
	d := clusterDeployment(t)
	const prefix = "fo"
	a := startAPI(t, d.rc, prefix, replicaAcks(1))
	startWorkerOf(t, openDeployment(t, d.rc, prefix, replicaAcks(1)), d.queues, nil, map[string]dtq.HandlerFunc{
		"work": func(ctx context.Context, task *dtq.Task) (any, error) {
			select { // long enough that most submissions of a key collapse
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			return "done", nil
		},
	})
	type answer struct {
		queue, key string
		outcome    string // created, collapsed, unknown
		id         string
	}
	var (
		mu      sync.Mutex
		answers []answer
	)
	hc := &http.Client{Timeout: 10 * time.Second}
	submit := func(q, key string) {
		body := fmt.Sprintf(`{"task_type":"work","queue":%q,"dedup":{"key":%q,"mode":"drop"}}`, q, key)
		an := answer{queue: q, key: key, outcome: "unknown"}
		resp, err := hc.Post(a.url+"/api/v1/tasks", "application/json", bytes.NewReader([]byte(body)))
		if err == nil {
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var r dedupReply
			_ = json.Unmarshal(raw, &r)
			an.id = r.TaskID
			switch {
			case resp.StatusCode == http.StatusAccepted:
				an.outcome = "created"
			case resp.StatusCode == http.StatusOK && r.Deduplicated == "drop":
				an.outcome = "collapsed"
			case resp.StatusCode == http.StatusServiceUnavailable:
				an.outcome = "unknown" // refused or unknown: either way nothing to hold it to
			default:
				an.outcome = fmt.Sprintf("wrong %d %s", resp.StatusCode, raw)
			}
		}
		mu.Lock()
		answers = append(answers, an)
		mu.Unlock()
	}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var producers sync.WaitGroup
	for p := range 3 {
		producers.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				q := d.queues[(i+p)%len(d.queues)]
				submit(q, fmt.Sprintf("k%d", i%4))
				select {
				case <-loadCtx.Done():
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
	defer func() { stopLoad(); producers.Wait() }()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(answers) > 200 },
		60*time.Second, 20*time.Millisecond, "the load never got going")
	restart := d.kill()
	require.NoError(t, d.healthy(), "no replica took over")
	require.NoError(t, restart())
	require.NoError(t, d.healthy())
	// Load on the recovered cluster until a submission to the failed-over
	// queue is created or collapsed again.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, an := range answers[len(answers)-min(len(answers), 10):] {
			if an.queue == d.queues[0] && an.outcome != "unknown" {
				return true
			}
		}
		return false
	}, 2*time.Minute, 50*time.Millisecond, "the failed-over queue never answered again")
	stopLoad()
	producers.Wait()

	ctx := context.Background()
	mu.Lock()
	all := append([]answer(nil), answers...)
	mu.Unlock()
	counts := map[string]int{}
	var wrong []string
	for _, an := range all {
		counts[an.outcome]++
		if an.outcome == "unknown" {
			continue
		}
		if an.outcome != "created" && an.outcome != "collapsed" {
			wrong = append(wrong, an.outcome)
			continue
		}
		var ti *dtqtype.TaskInfo
		var err error
		require.Eventually(t, func() bool { // a read may still be moving to the new master
			ti, err = a.insp.GetTask(ctx, an.id)
			return err == nil || isNotFound(err)
		}, 30*time.Second, 50*time.Millisecond)
		switch {
		case err != nil:
			wrong = append(wrong, fmt.Sprintf("%s answer on %s names task %s: %v", an.outcome, an.queue, an.id, err))
		case ti.DedupKey != an.key || ti.Queue != an.queue:
			wrong = append(wrong, fmt.Sprintf("%s answer for %s/%s names task %s of %s/%s", an.outcome, an.queue, an.key, an.id, ti.Queue, ti.DedupKey))
		}
	}
	// Every task ends, and no key had two live tasks at once (the feed of
	// each queue, in the order its master ran the scripts).
	keys := rdb.NewKeys(prefix)
	overlaps := 0
	for _, q := range d.queues {
		var evs []map[string]any
		require.Eventually(t, func() bool {
			xs, err := d.rc.XRange(ctx, keys.Events(q), "-", "+").Result()
			if err != nil {
				return false
			}
			evs = evs[:0]
			for _, x := range xs {
				evs = append(evs, x.Values)
			}
			return true
		}, 30*time.Second, 50*time.Millisecond)
		keyOf := map[string]string{}
		live := map[string]map[string]bool{}
		for _, e := range evs {
			id, _ := e["task_id"].(string)
			typ, _ := e["type"].(string)
			k, ok := keyOf[id]
			if !ok {
				var ti *dtqtype.TaskInfo
				require.Eventually(t, func() bool {
					var err error
					ti, err = a.insp.GetTask(ctx, id)
					return err == nil
				}, 30*time.Second, 50*time.Millisecond, "task %s of the feed", id)
				k = ti.DedupKey
				keyOf[id] = k
				if live[k] == nil {
					live[k] = map[string]bool{}
				}
				if len(live[k]) > 0 {
					overlaps++
					wrong = append(wrong, fmt.Sprintf("%s/%s: task %s created while %v live", q, k, id, live[k]))
				}
				live[k][id] = true
				continue
			}
			switch typ {
			case "TASK_SUCCEEDED", "TASK_FAILED", "TASK_DEAD_LETTERED", "TASK_CANCELLED", "TASK_EXPIRED":
				delete(live[k], id)
			}
		}
		for id := range keyOf {
			a.waitStatus(t, id, dtqtype.StatusSucceeded)
		}
	}
	line := fmt.Sprintf("FAULT dedup_cluster_failover replica_acks=1: submissions=%d created=%d collapsed=%d unknown=%d wrong=%d drop_overlaps=%d",
		len(all), counts["created"], counts["collapsed"], counts["unknown"], len(wrong), overlaps)
	fmt.Println(line)
	t.Log(line)
	require.Empty(t, wrong)
	require.Positive(t, counts["collapsed"])
	require.Positive(t, counts["created"])
}

func isNotFound(err error) bool { return errors.Is(err, dtq.ErrTaskNotFound) }
