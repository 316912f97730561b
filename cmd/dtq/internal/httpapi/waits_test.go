package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// TestLongPollBounds holds long-polls on one task: past DTQ_MAX_WAITS_PER_KEY
// for a key, and past DTQ_MAX_WAITS in all, a wait is 429 TOO_MANY_WAITS
// with Retry-After; the waiters share one poller; clients that leave free
// their slots and log no warning; and the waiters still there get the task
// once it finishes.
func TestLongPollBounds(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys, maxWaits: 3, maxWaitsPerKey: 2})
	id := b.submit(t, dtq.Submission{Type: "echo", Queue: "unserved"})
	path := "/api/v1/tasks/" + id + "?wait=60s"

	type poll struct {
		cancel context.CancelFunc
		done   chan *http.Response
	}
	start := func(secret string) poll {
		ctx, cancel := context.WithCancel(b.ctx)
		p := poll{cancel: cancel, done: make(chan *http.Response, 1)}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+secret)
		go func() {
			res, err := b.srv.Client().Do(req)
			if err != nil {
				close(p.done)
				return
			}
			p.done <- res
		}()
		return p
	}
	var polls []poll
	t.Cleanup(func() {
		for _, p := range polls {
			p.cancel()
		}
	})
	inFlight := func(n int) func() bool {
		return func() bool {
			b.api.waits.mu.Lock()
			defer b.api.waits.mu.Unlock()
			return b.api.waits.inFlight == n
		}
	}
	refused := func(secret, scope string) {
		// A short wait, so that an unbounded server answers 200 soon.
		res := b.do(t, http.MethodGet, "/api/v1/tasks/"+id+"?wait=1s", "", "Authorization", "Bearer "+secret)
		e := res.requireError(t, http.StatusTooManyRequests, codeTooManyWaits, "")
		require.Equal(t, scope, e.Details["scope"])
		require.Equal(t, "1", res.header.Get("Retry-After"))
	}

	polls = append(polls, start("reader-secret"), start("reader-secret"))
	require.Eventually(t, inFlight(2), 10*time.Second, 5*time.Millisecond)
	refused("reader-secret", "key")
	polls = append(polls, start("admin-secret"))
	require.Eventually(t, inFlight(3), 10*time.Second, 5*time.Millisecond)
	refused("producer-secret", "total")
	// A read without wait is not a long-poll.
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "", "Authorization", "Bearer reader-secret").status)

	b.api.watches.mu.Lock()
	require.Len(t, b.api.watches.byID, 1, "one poller for the task")
	require.Equal(t, 3, b.api.watches.byID[id].waiters)
	b.api.watches.mu.Unlock()

	// Two clients leave: their slots free, and nothing is logged above DEBUG.
	polls[0].cancel()
	polls[1].cancel()
	require.Eventually(t, inFlight(1), 10*time.Second, 5*time.Millisecond)
	polls = append(polls, start("reader-secret"))
	require.Eventually(t, inFlight(2), 10*time.Second, 5*time.Millisecond)

	// The task finishes: both waiters get it.
	_, err := b.admin.CancelTask(b.ctx, id, "")
	require.NoError(t, err)
	var wg sync.WaitGroup
	for _, p := range polls[2:] {
		wg.Go(func() {
			res, ok := <-p.done
			require.True(t, ok, "the long-poll failed")
			body, err := io.ReadAll(res.Body)
			_ = res.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, res.StatusCode, string(body))
			require.Contains(t, string(body), `"status":"cancelled"`)
		})
	}
	wg.Wait()
	require.Eventually(t, inFlight(0), 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		b.api.watches.mu.Lock()
		defer b.api.watches.mu.Unlock()
		return len(b.api.watches.byID) == 0
	}, 10*time.Second, 5*time.Millisecond)
	for _, line := range strings.Split(b.logs.String(), "\n") {
		require.NotContains(t, line, `"level":"WARN"`, "a client that left is no warning")
		require.NotContains(t, line, `"level":"ERROR"`)
	}
}

// TestWaitingClaimsAreBounded: a claim that waits counts against the
// process's long-poll bound (DTQ_MAX_WAITS), shared with task waits, but
// not against a key's (a fleet of HTTP workers may share one key); past
// it, a waiting claim is 429 TOO_MANY_WAITS and claims nothing, while a
// claim that does not wait still goes through.
func TestWaitingClaimsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys, maxWaits: 2, maxWaitsPerKey: 1})
	worker := []string{"Authorization", "Bearer worker-secret"}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	var held sync.WaitGroup
	for i := range 2 {
		body := strings.NewReader(`{"worker_id": "w-` + string(rune('a'+i)) + `", "queues": ["idle"], "wait": "30s"}`)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/api/v1/claims", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(worker[0], worker[1])
		held.Go(func() {
			if res, err := b.srv.Client().Do(req); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	}
	require.Eventually(t, func() bool {
		b.api.waits.mu.Lock()
		defer b.api.waits.mu.Unlock()
		return b.api.waits.inFlight == 2
	}, 10*time.Second, 5*time.Millisecond, "two waiting claims of one key, past its per-key bound of 1")

	// (on another queue: the waiting claims would take its task)
	id := b.submit(t, dtq.Submission{Type: "echo", Queue: "busy"})
	res := b.do(t, http.MethodPost, "/api/v1/claims", `{"worker_id": "w-c", "queues": ["busy"], "wait": "1s"}`, worker...)
	e := res.requireError(t, http.StatusTooManyRequests, codeTooManyWaits, "")
	require.Equal(t, "total", e.Details["scope"])
	require.Equal(t, "1", res.header.Get("Retry-After"))
	b.do(t, http.MethodGet, "/api/v1/tasks/"+id+"?wait=1s", "", "Authorization", "Bearer reader-secret").
		requireError(t, http.StatusTooManyRequests, codeTooManyWaits, "")
	// Not waiting, the claim goes through (and takes the task).
	tasks := b.claimTasks(t, `{"worker_id": "w-c", "queues": ["busy"]}`, worker...)
	require.Len(t, tasks, 1)
	require.Equal(t, id, tasks[0].TaskID)
	cancel()
	held.Wait()
	require.Eventually(t, func() bool {
		b.api.waits.mu.Lock()
		defer b.api.waits.mu.Unlock()
		return b.api.waits.inFlight == 0
	}, 10*time.Second, 5*time.Millisecond, "claims that end free their place")
}
