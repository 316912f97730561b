package faultsuite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/internal/rdb"
)

// TestQueueRegistrationUnderLostReplies submits the first task of many new
// queues at once while the proxy loses the replies of the registry script
// and of the write of each queue's number key (go-redis sends them again).
// Every queue must end with one number, the same in the registry, in its
// number key and in every accepted task id, and no two queues may share
// one: an id never names another queue.
func TestQueueRegistrationUnderLostReplies(t *testing.T) {
	t.Parallel()
	g := newIngestRig(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 60 {
			if i%2 == 0 {
				g.proxy.CutAfter([]byte(rdb.ScriptHash("register_queue")), 1)
			} else {
				g.proxy.CutAfter([]byte(":qnum:"), 1)
			}
			time.Sleep(20 * time.Millisecond) // the fault's pace, not a wait for anything
		}
		g.proxy.CutAfter(nil, 0)
	}()
	const queues = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := map[string][]string{} // queue -> task ids
	for i := range queues {
		q := "reg-" + strconv.Itoa(i)
		wg.Go(func() {
			for range 3 {
				for _, a := range g.post(t, "/api/v1/tasks", map[string]any{"task_type": "echo", "queue": q}) {
					if a.status == http.StatusAccepted {
						mu.Lock()
						accepted[q] = append(accepted[q], a.taskID)
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	<-done
	cuts := g.proxy.Cuts()
	require.Positive(t, cuts, "the proxy must have lost some replies")

	ctx := t.Context()
	seen := map[string]string{} // number -> queue
	for i := range queues {
		q := "reg-" + strconv.Itoa(i)
		inRegistry, err := g.direct.HGet(ctx, g.keys.Queues(), q).Result()
		require.NoError(t, err, q)
		own, err := g.direct.Get(ctx, g.keys.QueueNum(q)).Result()
		require.NoError(t, err, q)
		require.Equal(t, inRegistry, own, "queue %s: registry and number key disagree", q)
		back, err := g.direct.HGet(ctx, g.keys.Queues(), "#"+own).Result()
		require.NoError(t, err)
		require.Equal(t, q, back, "number %s names another queue", own)
		require.NotContains(t, seen, own, "two queues share number %s", own)
		seen[own] = q
		for _, id := range accepted[q] {
			n, ok := rdb.ParseTaskID(id)
			require.True(t, ok, id)
			require.Equal(t, own, strconv.Itoa(int(n)), "task %s of %s carries another queue's number", id, q)
			exists, err := g.direct.Exists(ctx, g.keys.Task(q, id)).Result()
			require.NoError(t, err)
			require.EqualValues(t, 1, exists, "accepted task %s is not in %s", id, q)
		}
	}
	t.Logf("REGISTRY lost_replies cuts=%d queues=%d accepted=%d distinct_numbers=%d", cuts, queues, func() int {
		n := 0
		for _, ids := range accepted {
			n += len(ids)
		}
		return n
	}(), len(seen))
}

// TestWorkerAdmitUnderLostReplies registers HTTP workers of one key, past
// its bound, while every admission's reply is lost once, or its request cut
// before it reached Redis (go-redis sends it again either way). A resent
// admission of an id its first run admitted must answer admitted, never
// "full": exactly the bound's number of ids get 200 and a record, the rest
// 429 TOO_MANY_WORKERS.
func TestWorkerAdmitUnderLostReplies(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"lost reply", "cut request"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testWorkerAdmitUnderFaults(t, mode == "lost reply")
		})
	}
}

func testWorkerAdmitUnderFaults(t *testing.T, lostReply bool) {
	proxy, direct, _ := proxied(t)
	apiRedis := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = apiRedis.Close() })
	const prefix, bound = "adm", 5
	dep := openDeployment(t, apiRedis, prefix)
	c, err := dep.NewClient(nil)
	require.NoError(t, err)
	in := dep.Inspector()
	adm, err := dep.NewAdmin(nil)
	require.NoError(t, err)
	gateway, err := dep.NewWorkerGateway(&dtq.WorkerGatewayConfig{MaxWorkersPerKey: bound,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	api, err := httpapi.New(httpapi.Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: gateway,
		Keys:   []httpapi.APIKey{{Role: httpapi.RoleWorker, Name: "py", Secret: "py-secret"}},
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	statuses := map[int]int{}
	admit := []byte(rdb.ScriptHash("worker_admit"))
	for i := range 2 * bound {
		if lostReply {
			proxy.CutAfter(admit, 1)
		} else {
			proxy.CutBefore(admit, 1)
		}
		body := fmt.Sprintf(`{"worker_id": "py-%d", "queues": ["work"]}`, i)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/api/v1/claims", bytes.NewBufferString(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", "py-secret")
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		res.Body.Close()
		statuses[res.StatusCode]++
	}
	require.Equal(t, map[int]int{http.StatusOK: bound, http.StatusTooManyRequests: bound}, statuses)
	require.EqualValues(t, 2*bound, proxy.Cuts(), "every admission was cut once")
	keys := rdb.NewKeys(prefix)
	n, err := direct.ZCard(t.Context(), keys.WorkersOfKey("py")).Result()
	require.NoError(t, err)
	require.EqualValues(t, bound, n)
	n, err = direct.ZCard(t.Context(), keys.Workers()).Result()
	require.NoError(t, err)
	require.EqualValues(t, bound, n)
}

// TestCreateQueueUnderLostReplies creates queues while the reply of the
// registry script is lost once each (go-redis sends it again, and the
// resent script finds the entry its first run made): the call that made a
// queue is still told 201 created, and a second create 200.
func TestCreateQueueUnderLostReplies(t *testing.T) {
	t.Parallel()
	g := newIngestRig(t)
	put := func(q string) (int, bool) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, g.url+"/api/v1/queues/"+q, nil)
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out struct {
			Created bool `json:"created"`
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		return res.StatusCode, out.Created
	}
	register := []byte(rdb.ScriptHash("register_queue"))
	for i := range 10 {
		q := "made-" + strconv.Itoa(i)
		before := g.proxy.Cuts()
		g.proxy.CutAfter(register, 1)
		status, created := put(q)
		require.Equal(t, before+1, g.proxy.Cuts(), "the reply of %s's registration was lost", q)
		require.Equal(t, http.StatusCreated, status, q)
		require.True(t, created, q)
		status, created = put(q)
		require.Equal(t, http.StatusOK, status, q)
		require.False(t, created, q)
	}
	g.proxy.CutAfter(nil, 0)
}

// TestCreatePartitionedQueueUnderLostReplies creates partitioned queues
// while the reply of the map's script (partition_queue) or of a partition's
// registration is lost once each (go-redis sends it again): the call that
// made a queue is told 201 with its partitions, a second create 200, and
// every partition holds one number of its own, the same in the registry
// and in its number key.
func TestCreatePartitionedQueueUnderLostReplies(t *testing.T) {
	t.Parallel()
	g := newIngestRig(t)
	put := func(q string) (int, bool, int) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, g.url+"/api/v1/queues/"+q, bytes.NewReader([]byte(`{"partitions": 4}`)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out struct {
			Created    bool `json:"created"`
			Partitions int  `json:"partitions"`
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		return res.StatusCode, out.Created, out.Partitions
	}
	scripts := [][]byte{[]byte(rdb.ScriptHash("partition_queue")), []byte(rdb.ScriptHash("register_queue"))}
	r := rdb.New(g.direct, g.keys.Prefix())
	numbers := map[string]string{}
	for i := range 6 {
		q := "hot-" + strconv.Itoa(i)
		before := g.proxy.Cuts()
		g.proxy.CutAfter(scripts[i%2], 1)
		status, created, parts := put(q)
		require.Equal(t, before+1, g.proxy.Cuts(), "a reply of %s's creation was lost", q)
		require.Equal(t, http.StatusCreated, status, q)
		require.True(t, created, q)
		require.Equal(t, 4, parts, q)
		status, created, parts = put(q)
		require.Equal(t, http.StatusOK, status, q)
		require.False(t, created, q)
		require.Equal(t, 4, parts, q)
		names, err := r.Partitions(t.Context(), q, false)
		require.NoError(t, err)
		require.Len(t, names, 4)
		for _, n := range names {
			inRegistry, err := g.direct.HGet(t.Context(), g.keys.Queues(), n).Result()
			require.NoError(t, err, n)
			own, err := g.direct.Get(t.Context(), g.keys.QueueNum(n)).Result()
			require.NoError(t, err, n)
			require.Equal(t, inRegistry, own, "partition %s: registry and number key disagree", n)
			require.NotContains(t, numbers, own, "two partitions share number %s", own)
			numbers[own] = n
		}
	}
	g.proxy.CutAfter(nil, 0)
}
