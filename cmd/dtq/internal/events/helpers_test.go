package events

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// testConfig is fast enough for tests: new queues are found within 20 ms
// and readers stop within 200 ms.
func testConfig() *Config {
	return &Config{PollInterval: 20 * time.Millisecond, Block: 200 * time.Millisecond}
}

// bundle is what a feed test needs: a running hub on its own key prefix,
// its handlers behind a real listener, and a Redis client to write events.
type bundle struct {
	ctx  context.Context
	rc   *redis.Client
	rdb  *rdb.RDB
	keys rdb.Keys
	hub  *Hub
	srv  *httptest.Server
	stop func() // stops the hub (idempotent)
}

func setup(t *testing.T, cfg *Config) *bundle {
	t.Helper()
	s := redistest.New(t)
	return setupOn(t, s.Client, s.Prefix, cfg)
}

// setupOn is setup on a given server and prefix; before runs on the hub
// before it starts.
func setupOn(t *testing.T, rc *redis.Client, prefix string, cfg *Config, before ...func(*Hub)) *bundle {
	t.Helper()
	if cfg == nil {
		cfg = testConfig()
	}
	r := rdb.New(rc, prefix)
	hub, err := NewHub(rc, prefix, cfg)
	require.NoError(t, err)
	for _, f := range before {
		f(hub)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/events", hub.ServeSSE)
	mux.HandleFunc("GET /ws/events", hub.ServeWS)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close) // runs after the hub stopped, which ends the streams

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	return &bundle{ctx: context.Background(), rc: rc, rdb: r, keys: r.Keys(), hub: hub, srv: srv, stop: stop}
}

// register adds queues to the registry, as a first submission would.
func (b *bundle) register(t *testing.T, queues ...string) {
	t.Helper()
	for _, q := range queues {
		_, err := b.rdb.QueueNumber(b.ctx, q)
		require.NoError(t, err)
	}
}

// waitReaders waits until the hub has a reader for each of queues' streams
// (parked until a subscription attaches).
func (b *bundle) waitReaders(t *testing.T, queues ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.hub.mu.Lock()
		defer b.hub.mu.Unlock()
		for _, q := range queues {
			if b.hub.readers[q] == nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
}

// ev is an event to write the way the scripts do.
type ev struct {
	typ, task, taskType, worker, meta string
	attempt                           int
}

// taskEvent is an event of type typ about a new task.
func taskEvent(typ string) ev {
	return ev{typ: typ, task: rdb.NewTaskID(1, time.Now()), taskType: "echo", attempt: 1}
}

// add appends events to queue's stream with XADD MAXLEN ~ 100000 (one
// pipeline) and returns their ids in order.
func (b *bundle) add(t *testing.T, queue string, evs ...ev) []string {
	t.Helper()
	return b.addTo(t, b.keys.Events(queue), 100000, true, evs...)
}

func (b *bundle) addTo(t *testing.T, key string, maxLen int64, approx bool, evs ...ev) []string {
	t.Helper()
	ids, err := b.xadd(key, maxLen, approx, evs...)
	require.NoError(t, err)
	return ids
}

// xadd is addTo for goroutines other than the test's.
func (b *bundle) xadd(key string, maxLen int64, approx bool, evs ...ev) ([]string, error) {
	pipe := b.rc.Pipeline()
	cmds := make([]*redis.StringCmd, len(evs))
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for i, e := range evs {
		vals := []any{"type", e.typ, "task_id", e.task, "task_type", e.taskType, "attempt", strconv.Itoa(e.attempt), "ts", now}
		if e.worker != "" {
			vals = append(vals, "worker_id", e.worker)
		}
		if e.meta != "" {
			vals = append(vals, "meta", e.meta)
		}
		cmds[i] = pipe.XAdd(b.ctx, &redis.XAddArgs{Stream: key, MaxLen: maxLen, Approx: approx, Values: vals})
	}
	if _, err := pipe.Exec(b.ctx); err != nil {
		return nil, err
	}
	ids := make([]string, len(evs))
	for i, c := range cmds {
		ids[i] = c.Val()
	}
	return ids, nil
}

// frame is one SSE frame: its fields, or a comment.
type frame struct {
	id, event, data, comment string
	hasID                    bool
}

// sseConn is an open SSE response.
type sseConn struct {
	resp   *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
}

// openSSE opens the feed with query and, unless empty, Last-Event-ID. It
// fails the test unless the answer is 200.
func (b *bundle) openSSE(t *testing.T, query, lastEventID string) *sseConn {
	t.Helper()
	c, resp := b.tryOpenSSE(t, query, lastEventID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return c
}

func (b *bundle) tryOpenSSE(t *testing.T, query, lastEventID string) (*sseConn, *http.Response) {
	t.Helper()
	c, err := b.dialSSE(query, lastEventID)
	require.NoError(t, err)
	t.Cleanup(c.close)
	return c, c.resp
}

// dialSSE opens the feed; the caller closes the connection.
func (b *bundle) dialSSE(query, lastEventID string) (*sseConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+"/api/v1/events"+query, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	return &sseConn{resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}, nil
}

func (c *sseConn) close() {
	c.cancel()
	_ = c.resp.Body.Close()
}

// next reads one frame.
func (c *sseConn) next() (frame, error) {
	var f frame
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return f, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if f.hasID || f.event != "" || f.data != "" || f.comment != "" {
				return f, nil
			}
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "":
			f.comment = v
		case "id":
			f.id, f.hasID = v, true
		case "event":
			f.event = v
		case "data":
			f.data = v
		}
	}
}

// nextEvent reads frames until one carries an event.
func (c *sseConn) nextEvent(t *testing.T) frame {
	t.Helper()
	for {
		f, err := c.next()
		require.NoError(t, err)
		if f.event != "" {
			return f
		}
	}
}

// start reads the opening frame and returns the cursor it carries.
func (c *sseConn) start(t *testing.T) string {
	t.Helper()
	f, err := c.next()
	require.NoError(t, err)
	require.True(t, f.hasID, "the first frame carries the cursor")
	return f.id
}

func envelopeOf(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(data), &m))
	return m
}
