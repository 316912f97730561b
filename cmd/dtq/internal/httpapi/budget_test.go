package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBodyBudget holds one batch's body half sent, so that its
// Content-Length stays reserved, and sends a batch that does not fit in
// what is left of DTQ_MAX_BODY_BYTES_IN_FLIGHT: the batch is 503
// SERVER_BUSY with Retry-After and nothing of it is stored; once the first
// request is answered its bytes are free again. A body sent without a
// length is reserved as it arrives and refused the same way.
func TestBodyBudget(t *testing.T) {
	t.Parallel()
	const budget = maxBatchBodyBytes // the least New accepts
	b := setup(t, options{maxBodyInFlight: budget})

	// A batch of size bytes: one task, then spaces (valid JSON that costs
	// Redis nothing).
	batch := func(queue string, size int) string {
		head := fmt.Sprintf(`{"tasks": [{"task_type": "echo", "queue": %q}]`, queue)
		return head + strings.Repeat(" ", size-len(head)-1) + "}"
	}
	// A 10 MiB batch, sent in two halves.
	body := batch("held", 10<<20)
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.CloseWithError(io.ErrUnexpectedEOF) }) // before the server closes
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.srv.URL+"/api/v1/tasks/batch", pr)
	require.NoError(t, err)
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	held := make(chan *http.Response, 1)
	go func() {
		res, err := b.srv.Client().Do(req)
		if err != nil {
			close(held)
			return
		}
		held <- res
	}()
	_, err = io.WriteString(pw, body[:len(body)/2])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.api.bodies.inUse() == int64(len(body)) },
		10*time.Second, 5*time.Millisecond, "the held body's length is reserved")

	// 7 MiB more do not fit in 16.
	res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", batch("busy", 7<<20))
	e := res.requireError(t, http.StatusServiceUnavailable, codeServerBusy, "")
	require.Contains(t, e.Message, "DTQ_MAX_BODY_BYTES_IN_FLIGHT")
	require.Equal(t, "1", res.header.Get("Retry-After"))
	b.do(t, http.MethodGet, "/api/v1/queues/busy", "").requireError(t, http.StatusNotFound, codeQueueNotFound, "")

	// Without a Content-Length the body is reserved as it arrives, and
	// refused once the 6 MiB left are used.
	req, err = http.NewRequestWithContext(b.ctx, http.MethodPost, b.srv.URL+"/api/v1/tasks/batch",
		io.MultiReader(strings.NewReader(batch("chunked", 6<<20+100<<10)))) // no length known
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	chunked, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	_ = chunked.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, chunked.StatusCode)
	b.do(t, http.MethodGet, "/api/v1/queues/chunked", "").requireError(t, http.StatusNotFound, codeQueueNotFound, "")

	_, err = io.WriteString(pw, body[len(body)/2:])
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	first, ok := <-held
	require.True(t, ok, "the held request failed")
	_ = first.Body.Close()
	require.Equal(t, http.StatusOK, first.StatusCode)
	require.Eventually(t, func() bool { return b.api.bodies.inUse() == 0 }, 10*time.Second, 5*time.Millisecond)

	res = b.do(t, http.MethodPost, "/api/v1/tasks/batch", batch("busy", 7<<20))
	require.Equal(t, http.StatusOK, res.status, "%.300s", res.body)
	// Released once the handler has returned, just after the answer is sent.
	require.Eventually(t, func() bool { return b.api.bodies.inUse() == 0 }, 10*time.Second, 5*time.Millisecond)
}

// TestBodyBudgetTooSmall: a budget that cannot hold the largest body would
// refuse it forever, so New refuses the budget.
func TestBodyBudgetTooSmall(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	cfg := b.api.cfg
	cfg.MaxBodyBytesInFlight = maxBatchBodyBytes - 1
	_, err := New(cfg)
	require.ErrorContains(t, err, "MaxBodyBytesInFlight")
}
