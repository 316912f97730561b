package faultsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/rdb"
)

// ingestRig is an API over a fault proxy in front of its own Redis, with no
// worker: every task it creates stays queued, so what Redis holds can be
// compared with what the API answered.
type ingestRig struct {
	proxy  *faultproxy.Proxy
	direct *redis.Client
	url    string
	keys   rdb.Keys
}

// With partitions, the default queue is created with that many
// partitions first.
func newIngestRig(t *testing.T, partitions ...int) *ingestRig {
	t.Helper()
	proxy, direct, _ := proxied(t)
	// The API uses go-redis's defaults, as most users do: a command whose
	// connection broke is sent again by go-redis itself.
	apiRedis := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = apiRedis.Close() })
	const prefix = "ing"
	dep := openDeployment(t, apiRedis, prefix)
	c, err := dep.NewClient(&dtq.ClientConfig{MaxQueueDepth: 1 << 20})
	require.NoError(t, err)
	in := dep.Inspector()
	adm, err := dep.NewAdmin(nil)
	require.NoError(t, err)
	for _, p := range partitions {
		_, err := adm.CreateQueue(t.Context(), dtq.DefaultQueue, &dtq.QueueOptions{Partitions: p})
		require.NoError(t, err)
	}
	gateway, err := dep.NewWorkerGateway(&dtq.WorkerGatewayConfig{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	api, err := httpapi.New(httpapi.Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: gateway, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &ingestRig{proxy: proxy, direct: direct, url: srv.URL, keys: rdb.NewKeys(prefix)}
}

// answer is what one submission was told about one task.
type answer struct {
	status int
	code   string
	taskID string
}

// post sends body to path once and returns its answers: one for a single
// submission, one per item for a batch.
func (g *ingestRig) post(t *testing.T, path string, body any) []answer {
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(g.url+path, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	type one struct {
		TaskID string `json:"task_id"`
		Code   string `json:"code"`
		Det    struct {
			TaskID string `json:"task_id"`
		} `json:"details"`
	}
	pick := func(status int, o one) answer {
		a := answer{status: status, code: o.Code, taskID: o.TaskID}
		if a.taskID == "" {
			a.taskID = o.Det.TaskID
		}
		return a
	}
	if path == "/api/v1/tasks/batch" && resp.StatusCode == http.StatusOK {
		var out struct {
			Items []struct {
				Status int  `json:"http_status"`
				Task   *one `json:"task"`
				Error  *one `json:"error"`
			} `json:"items"`
		}
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
		answers := make([]answer, len(out.Items))
		for i, it := range out.Items {
			o := it.Task
			if o == nil {
				o = it.Error
			}
			require.NotNil(t, o, "%s", raw)
			answers[i] = pick(it.Status, *o)
		}
		return answers
	}
	var o one
	require.NoError(t, json.Unmarshal(raw, &o), "%d %s", resp.StatusCode, raw)
	return []answer{pick(resp.StatusCode, o)}
}

// TestIngestUnderLostReplies submits keyless, keyed and batched tasks once
// each while the proxy lets ingest calls reach Redis and cuts their
// connection before the reply (go-redis then sends the call again), and
// resets every connection now and then. Every answer must be true:
//   - a task answered 202 exists, with exactly one band stream entry and
//     one TASK_QUEUED event (no second copy from a resent call);
//   - a keyed submission, the first and only one of its key, is never told
//     409 (in progress) — there is no other task it could be about;
//   - a 503 OUTCOME_UNKNOWN names a task that may exist (at most once); a
//     503 REDIS_UNAVAILABLE names none that exists;
//   - Redis holds no task nobody was told of, and the depth counts each
//     task once.
func TestIngestUnderLostReplies(t *testing.T) {
	t.Parallel()
	g := newIngestRig(t)
	var (
		mu      sync.Mutex
		answers []answer
		wrong   []string
	)
	record := func(kind string, as []answer) {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range as {
			switch {
			case a.status == http.StatusAccepted,
				a.status == http.StatusServiceUnavailable && (a.code == "OUTCOME_UNKNOWN" || a.code == "REDIS_UNAVAILABLE"):
			default:
				wrong = append(wrong, fmt.Sprintf("%s submission answered %d %s (task %s)", kind, a.status, a.code, a.taskID))
			}
			answers = append(answers, a)
		}
	}
	// Faults for 40 rounds: a lost ingest reply every 50 ms, every
	// connection reset every half second; the producers submit until the
	// faults end.
	done := make(chan struct{})
	go func() {
		defer close(done)
		ingest := []byte(rdb.ScriptHash("ingest"))
		for i := range 40 {
			g.proxy.CutAfter(ingest, 1)
			time.Sleep(50 * time.Millisecond) // the fault's pace, not a wait for anything
			if i%10 == 9 {
				g.proxy.ResetAll()
			}
		}
		g.proxy.CutAfter(nil, 0)
	}()
	var producers sync.WaitGroup
	for p := range 4 {
		producers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				typ := "work"
				switch i % 3 {
				case 0:
					record("keyless", g.post(t, "/api/v1/tasks", map[string]any{"task_type": typ}))
				case 1:
					key := fmt.Sprintf("p%d-%d", p, i)
					record("keyed", g.post(t, "/api/v1/tasks", map[string]any{"task_type": typ, "idempotency_key": key}))
				default:
					batch := make([]map[string]any, 5)
					for j := range batch {
						batch[j] = map[string]any{"task_type": typ}
					}
					batch[0]["idempotency_key"] = fmt.Sprintf("b%d-%d", p, i)
					record("batch", g.post(t, "/api/v1/tasks/batch", map[string]any{"tasks": batch}))
				}
			}
		})
	}
	producers.Wait()
	require.Positive(t, g.proxy.Cuts(), "no ingest reply was lost: the test tested nothing")
	require.Empty(t, wrong)

	ctx := context.Background()
	k := g.keys
	entries := map[string]int{}
	for band := range 10 {
		xs, err := g.direct.XRange(ctx, k.Stream("default", band), "-", "+").Result()
		require.NoError(t, err)
		for _, x := range xs {
			entries[x.Values["t"].(string)]++
		}
	}
	events := map[string]int{}
	evs, err := g.direct.XRange(ctx, k.Events("default"), "-", "+").Result()
	require.NoError(t, err)
	for _, e := range evs {
		if e.Values["type"] == "TASK_QUEUED" {
			events[e.Values["task_id"].(string)]++
		}
	}
	told := map[string]answer{}
	accepted, unknown, refused := 0, 0, 0
	for _, a := range answers {
		told[a.taskID] = a
		n, err := g.direct.Exists(ctx, k.Task("default", a.taskID)).Result()
		require.NoError(t, err)
		switch {
		case a.status == http.StatusAccepted:
			accepted++
			require.Equal(t, int64(1), n, "task %s was answered 202 but does not exist", a.taskID)
			require.Equal(t, 1, entries[a.taskID], "band entries of task %s", a.taskID)
			require.Equal(t, 1, events[a.taskID], "TASK_QUEUED events of task %s", a.taskID)
		case a.code == "OUTCOME_UNKNOWN":
			unknown++
			require.LessOrEqual(t, entries[a.taskID], 1, "band entries of task %s", a.taskID)
			require.Equal(t, int(n), entries[a.taskID], "task %s and its band entry", a.taskID)
		default:
			refused++
			require.Zero(t, n, "task %s was answered %s but exists", a.taskID, a.code)
		}
	}
	total := 0
	for id, n := range entries {
		_, ok := told[id]
		require.True(t, ok, "task %s is queued but no answer named it", id)
		total += n
	}
	depth, err := g.direct.Get(ctx, k.Depth("default")).Int()
	require.NoError(t, err)
	require.Equal(t, total, depth, "the depth must count each queued task once")
	t.Logf("INGEST lost_replies cuts=%d answers=%d accepted=%d unknown=%d refused=%d band_entries=%d depth=%d",
		g.proxy.Cuts(), len(answers), accepted, unknown, refused, total, depth)
}
