package events

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestSSEDeliversSubmittedTask(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c := b.openSSE(t, "", "")
	c.start(t)

	cl, err := openDeployment(t, b.rc, b.keys.Prefix()).NewClient(nil)
	require.NoError(t, err)
	info, err := cl.Submit(b.ctx, dtq.Submission{Queue: "emails", Type: "send_receipt", Payload: map[string]any{"order_id": 42}})
	require.NoError(t, err)

	f := c.nextEvent(t)
	require.Equal(t, TypeTaskQueued, f.event)
	env := envelopeOf(t, f.data)
	require.Regexp(t, `^emails/\d+-\d+$`, env["event_id"])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, env["ts"])
	require.Equal(t, TypeTaskQueued, env["type"])
	require.Equal(t, info.TaskID, env["task_id"])
	require.Equal(t, "emails", env["queue"])
	require.Equal(t, "send_receipt", env["task_type"])
	require.EqualValues(t, 1, env["attempt"])
	require.Nil(t, env["worker_id"])
	require.Equal(t, map[string]any{}, env["metadata"])

	cur, err := ParseCursor(f.id)
	require.NoError(t, err)
	id := strings.TrimPrefix(env["event_id"].(string), "emails/")
	require.Equal(t, id, cur.position("emails").String(), "the id line is the cursor after this event")
}

// TestResumeExactlyOnce disconnects a client again and again while 10 000
// events are written to three queues, and checks that resuming from the
// last cursor it saw delivers every event exactly once, in order per queue.
func TestResumeExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	queues := []string{"alpha", "beta", "gamma"}
	b.register(t, queues...)
	b.waitReaders(t, queues...)

	const total = 10000
	c := b.openSSE(t, "", "")
	cursor := c.start(t)

	produced := map[string][]string{}
	var wg sync.WaitGroup
	var produceErr error
	wg.Go(func() {
		for n := 0; n < total && produceErr == nil; {
			for _, q := range queues {
				batch := min(100, total-n)
				if batch == 0 {
					break
				}
				evs := make([]ev, batch)
				for i := range evs {
					evs[i] = taskEvent(TypeTaskQueued)
				}
				ids, err := b.xadd(b.keys.Events(q), 100000, true, evs...)
				if err != nil {
					produceErr = err
					return
				}
				for _, id := range ids {
					produced[q] = append(produced[q], q+"/"+id)
				}
				n += batch
			}
		}
	})

	received := map[string][]string{}
	count, conns := 0, 1
	for count < total {
		// Leave after a varying number of events, sometimes mid-batch.
		quota := 1 + (conns*797)%1500
		for i := 0; i < quota && count < total; i++ {
			f := c.nextEvent(t)
			env := envelopeOf(t, f.data)
			q := env["queue"].(string)
			received[q] = append(received[q], env["event_id"].(string))
			cursor = f.id
			count++
		}
		c.close()
		if count == total {
			break
		}
		conns++
		if conns%2 == 0 {
			c = b.openSSE(t, "?cursor="+cursor, "")
		} else {
			c = b.openSSE(t, "", cursor)
		}
		require.Equal(t, cursor, c.start(t), "a resumed stream starts at the cursor it was given")
	}
	wg.Wait()
	require.NoError(t, produceErr)
	require.Greater(t, conns, 5)
	for _, q := range queues {
		require.Equal(t, produced[q], received[q], "queue %s", q)
	}

	// Nothing more is pending: a last resume gets the next new event only.
	c = b.openSSE(t, "?cursor="+cursor, "")
	c.start(t)
	ids := b.add(t, "beta", taskEvent(TypeTaskStarted))
	require.Equal(t, "beta/"+ids[0], envelopeOf(t, c.nextEvent(t).data)["event_id"])
}

func TestFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.register(t, "a", "b")
	b.waitReaders(t, "a", "b")

	start := b.openSSE(t, "", "")
	cursor := start.start(t)
	start.close()

	tracked := taskEvent(TypeTaskQueued)
	trackedDone := tracked
	trackedDone.typ = TypeTaskSucceeded
	b.add(t, "a", taskEvent(TypeTaskQueued), tracked, taskEvent(TypeTaskQueued))
	b.add(t, "b", taskEvent(TypeTaskQueued), taskEvent(TypeTaskFailed))
	b.add(t, "a", trackedDone, taskEvent(TypeTaskFailed))
	b.add(t, "b", ev{typ: TypeQueuePaused, meta: `{"actor":"ops"}`})
	b.addTo(t, b.keys.SysEvents(), 1000, true, ev{typ: TypeWorkerStarted, worker: "w1"})

	// collect reads n events from cursor with query.
	collect := func(query string, n int) (events []map[string]any, last string) {
		sep := "?"
		if query != "" {
			sep = "&"
		}
		c := b.openSSE(t, query+sep+"cursor="+cursor, "")
		defer c.close()
		c.start(t)
		for range n {
			f := c.nextEvent(t)
			events = append(events, envelopeOf(t, f.data))
			last = f.id
		}
		return events, last
	}
	types := func(es []map[string]any) []string {
		var out []string
		for _, e := range es {
			out = append(out, e["type"].(string))
		}
		return out
	}

	es, _ := collect("?queue=b", 3)
	require.Equal(t, []string{TypeTaskQueued, TypeTaskFailed, TypeQueuePaused}, types(es))
	require.Nil(t, es[2]["task_id"])
	require.Equal(t, map[string]any{"actor": "ops"}, es[2]["metadata"])

	es, _ = collect("?queue=_sys", 1)
	require.Equal(t, "w1", es[0]["worker_id"])
	require.Equal(t, "_sys/", es[0]["event_id"].(string)[:5])

	es, _ = collect("?task_id="+tracked.task, 2)
	require.Equal(t, []string{TypeTaskQueued, TypeTaskSucceeded}, types(es))

	es, last := collect("?type=TASK_FAILED,QUEUE_PAUSED&queue=a,b", 3)
	require.ElementsMatch(t, []string{TypeTaskFailed, TypeTaskFailed, TypeQueuePaused}, types(es))

	// Filtered-out events moved the cursor: resuming from the last one
	// without a filter delivers only what came after.
	c := b.openSSE(t, "?cursor="+last+"&queue=a,b", "")
	c.start(t)
	ids := b.add(t, "a", taskEvent(TypeTaskStarted))
	require.Equal(t, "a/"+ids[0], envelopeOf(t, c.nextEvent(t).data)["event_id"])
}

func TestKeepAliveCarriesCursor(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.KeepAlive = 50 * time.Millisecond
	b := setup(t, cfg)
	b.register(t, "q")
	b.waitReaders(t, "q")
	c := b.openSSE(t, "?type=TASK_SUCCEEDED", "")
	first := c.start(t)
	ids := b.add(t, "q", taskEvent(TypeTaskQueued), taskEvent(TypeTaskStarted))

	// Keep-alives come while nothing matches; one of them carries the
	// cursor moved by the filtered-out events.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f, err := c.next()
		require.NoError(t, err)
		require.Empty(t, f.event)
		require.Equal(t, "keep-alive", f.comment)
		if f.hasID {
			require.NotEqual(t, first, f.id)
			cur, err := ParseCursor(f.id)
			require.NoError(t, err)
			if cur.position("q").String() == ids[1] {
				return
			}
		}
	}
	t.Fatal("no keep-alive carried the moved cursor")
}

func TestResetWhenCursorTrimmed(t *testing.T) {
	t.Parallel()
	// The ring may still hold events Redis trimmed (they are then delivered,
	// not reset); keep it smaller than the trimmed part.
	cfg := testConfig()
	cfg.RingSize = 4
	b := setup(t, cfg)
	b.register(t, "q")
	b.waitReaders(t, "q")

	c := b.openSSE(t, "", "")
	c.start(t)
	b.add(t, "q", taskEvent(TypeTaskQueued))
	old := c.nextEvent(t).id
	c.close()

	// An exact MAXLEN 3 trims everything but the last three entries.
	evs := make([]ev, 20)
	for i := range evs {
		evs[i] = taskEvent(TypeTaskQueued)
	}
	b.addTo(t, b.keys.Events("q"), 3, false, evs...)

	t.Run("sse", func(t *testing.T) {
		c := b.openSSE(t, "", old)
		require.Equal(t, old, c.start(t))
		f := c.nextEvent(t)
		require.Equal(t, "reset", f.event)
		data := envelopeOf(t, f.data)
		require.Equal(t, "q", data["queue"])
		require.Equal(t, f.id, data["cursor"])
		require.NotEqual(t, old, f.id)

		// The stream goes on from the fresh cursor: new events only.
		ids := b.add(t, "q", taskEvent(TypeTaskStarted))
		f = c.nextEvent(t)
		require.Equal(t, TypeTaskStarted, f.event)
		require.Equal(t, "q/"+ids[0], envelopeOf(t, f.data)["event_id"])
	})

	t.Run("ws", func(t *testing.T) {
		ws := b.dialWS(t, "?cursor="+url.QueryEscape(old))
		msg := ws.read(t)
		require.NotNil(t, msg["reset"])
		require.Equal(t, "q", msg["reset"].(map[string]any)["queue"])
		_, err := ParseCursor(msg["cursor"].(string))
		require.NoError(t, err)
		require.Equal(t, StatusCursorExpired, ws.closeStatus(t))
	})
	require.GreaterOrEqual(t, b.hub.Stats().Resets, int64(2))
}

// TestSlowSubscriberCatchesUp lets a subscription fall far behind the
// reader's ring and checks that it still gets everything in order, from
// Redis, and then follows the ring again.
func TestSlowSubscriberCatchesUp(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RingSize, cfg.BatchSize = 16, 8
	b := setup(t, cfg)
	b.register(t, "q")
	b.waitReaders(t, "q")

	sub, err := b.hub.Subscribe(b.ctx, Filter{Queues: []string{"q"}}, nil)
	require.NoError(t, err)
	defer sub.Close()

	var want []string
	for range 10 {
		evs := make([]ev, 100)
		for i := range evs {
			evs[i] = taskEvent(TypeTaskQueued)
		}
		for _, id := range b.add(t, "q", evs...) {
			want = append(want, "q/"+id)
		}
	}
	// Wait until the reader has moved the ring past the subscription.
	r := b.hub.readers["q"]
	require.Eventually(t, func() bool {
		last, _, _ := r.tail()
		return last.String() == strings.TrimPrefix(want[len(want)-1], "q/")
	}, 10*time.Second, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	var got []string
	for range want {
		e, err := sub.Next(ctx)
		require.NoError(t, err)
		got = append(got, e.ID)
	}
	require.Equal(t, want, got)
	catchups := b.hub.Stats().CatchupReads
	require.Greater(t, catchups, int64(100), "the backlog came from Redis, 8 events a read")

	// Back in the ring: live events need no Redis read of its own.
	for range 3 {
		ids := b.add(t, "q", taskEvent(TypeTaskStarted))
		e, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, "q/"+ids[0], e.ID)
	}
	require.Equal(t, catchups, b.hub.Stats().CatchupReads)
}

func TestNewQueueAfterSubscription(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	all := b.openSSE(t, "", "")
	all.start(t)
	only := b.openSSE(t, "?queue=later", "")
	only.start(t)

	// The queue appears after both subscriptions, and its first events are
	// written before the hub has noticed it.
	b.register(t, "later")
	ids := b.add(t, "later", taskEvent(TypeTaskQueued), taskEvent(TypeTaskStarted))
	for _, c := range []*sseConn{all, only} {
		for _, id := range ids {
			require.Equal(t, "later/"+id, envelopeOf(t, c.nextEvent(t).data)["event_id"])
		}
	}

	// A cursor issued before the queue existed reads it from the start too.
	b.register(t, "later2")
	ids = b.add(t, "later2", taskEvent(TypeTaskQueued))
	b.waitReaders(t, "later2")
	cur, err := ParseCursor(all.nextEvent(t).id)
	require.NoError(t, err)
	require.Equal(t, ids[0], cur.position("later2").String())
}

// TestRedisRestart kills Redis under an open stream and checks that the
// stream goes on with the events written after the restart.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	cfg := testConfig()
	cfg.KeepAlive = 100 * time.Millisecond
	b := setupOn(t, srv.Client(t), "dtq", cfg)
	b.register(t, "q")
	b.waitReaders(t, "q")

	c := b.openSSE(t, "", "")
	c.start(t)
	ids := b.add(t, "q", taskEvent(TypeTaskQueued))
	require.Equal(t, "q/"+ids[0], envelopeOf(t, c.nextEvent(t).data)["event_id"])

	srv.Kill()
	// The stream stays open through the outage (keep-alives go on).
	f, err := c.next()
	require.NoError(t, err)
	require.Equal(t, "keep-alive", f.comment)
	require.NoError(t, srv.Restart())

	ids = b.add(t, "q", taskEvent(TypeTaskStarted), taskEvent(TypeTaskSucceeded))
	for _, id := range ids {
		require.Equal(t, "q/"+id, envelopeOf(t, c.nextEvent(t).data)["event_id"])
	}
}

// TestConnectDisconnect opens and drops 1000 streams (and some WebSockets);
// nothing may stay behind (TestMain checks for leaked goroutines).
func TestConnectDisconnect(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.register(t, "q")
	b.waitReaders(t, "q")
	cycle := func(i int) error {
		c, err := b.dialSSE("", "")
		if err != nil {
			return err
		}
		defer c.close()
		if c.resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", c.resp.StatusCode)
		}
		if _, err := c.next(); err != nil {
			return err
		}
		if i%10 == 0 {
			ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
			defer cancel()
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.srv.URL, "http")+"/ws/events?queue=q",
				&websocket.DialOptions{HTTPClient: b.srv.Client()})
			if err != nil {
				return err
			}
			_ = ws.CloseNow()
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() {
			for i := range 100 {
				if err := cycle(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return b.hub.Stats().Subscriptions == 0 }, 10*time.Second, 5*time.Millisecond)
	r := b.hub.readers["q"]
	r.mu.RLock()
	defer r.mu.RUnlock()
	require.Empty(t, r.subs)
}

func TestBadRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, path := range []string{"/api/v1/events", "/ws/events"} {
		for query, field := range map[string]string{
			"?queue=NO":          "queue",
			"?type=TASK_UNKNOWN": "type",
			"?task_id=123":       "task_id",
			"?cursor=abc":        "cursor",
			"?limit=5":           "limit",
		} {
			req, err := http.NewRequest(http.MethodGet, b.srv.URL+path+query, nil)
			require.NoError(t, err)
			req.Header.Set("X-Request-ID", "req-1")
			resp, err := b.srv.Client().Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, query)
			env := envelopeOf(t, string(body))
			require.Equal(t, "INVALID_REQUEST", env["code"])
			require.Equal(t, "req-1", env["request_id"])
			require.Equal(t, map[string]any{"field": field}, env["details"])
			require.NotEmpty(t, env["message"])
		}
	}

	// The caller's error writer is used when given.
	cfg := testConfig()
	var got []any
	cfg.WriteError = func(w http.ResponseWriter, r *http.Request, status int, code, msg string, details map[string]any) {
		got = []any{status, code, details["field"]}
		w.WriteHeader(status)
	}
	b2 := setup(t, cfg)
	resp, err := b2.srv.Client().Get(b2.srv.URL + "/api/v1/events?type=nope")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, []any{http.StatusBadRequest, "INVALID_REQUEST", "type"}, got)
}

func TestHubStopEndsStreams(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c := b.openSSE(t, "", "")
	c.start(t)
	ws := b.dialWS(t, "")
	b.stop()
	_, err := io.ReadAll(c.br)
	require.NoError(t, err, "the stream ends cleanly")
	require.Equal(t, 1001, int(ws.closeStatus(t)), "going away")

	_, resp := b.tryOpenSSE(t, "", "")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	_, err = b.hub.Subscribe(b.ctx, Filter{}, nil)
	require.ErrorIs(t, err, ErrHubClosed)
	require.Error(t, b.hub.Run(b.ctx), "a hub runs once")
}

func TestSubscriptionNextIsCancelSafe(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.register(t, "q")
	b.waitReaders(t, "q")
	sub, err := b.hub.Subscribe(b.ctx, Filter{}, nil)
	require.NoError(t, err)
	defer sub.Close()

	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Millisecond)
	_, err = sub.Next(ctx)
	cancel()
	require.True(t, errors.Is(err, context.DeadlineExceeded))

	ids := b.add(t, "q", taskEvent(TypeTaskQueued), taskEvent(TypeTaskStarted))
	ctx, cancel = context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	for _, id := range ids {
		e, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, "q/"+id, e.ID)
		require.Equal(t, e.Cursor, sub.Cursor())
	}
}

var eventIDRe = regexp.MustCompile(`^[a-z0-9_][a-z0-9_-]*/\d+-\d+$`)

func TestEventIDsAreUnique(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.register(t, "x", "y")
	b.waitReaders(t, "x", "y")
	c := b.openSSE(t, "", "")
	c.start(t)
	b.add(t, "x", taskEvent(TypeTaskQueued))
	b.add(t, "y", taskEvent(TypeTaskQueued))
	seen := map[string]bool{}
	for range 2 {
		id := envelopeOf(t, c.nextEvent(t).data)["event_id"].(string)
		require.Regexp(t, eventIDRe, id)
		require.False(t, seen[id])
		seen[id] = true
	}
}

// TestStreamOutlivesReadTimeout checks that a server's ReadTimeout (the API
// server sets one) does not end an open stream.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.KeepAlive = 20 * time.Millisecond
	b := setup(t, cfg)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(b.hub.ServeSSE))
	srv.Config.ReadTimeout = 100 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	b.srv = srv

	c := b.openSSE(t, "", "")
	c.start(t)
	started := time.Now()
	for time.Since(started) < 5*srv.Config.ReadTimeout {
		f, err := c.next()
		require.NoError(t, err)
		require.Equal(t, "keep-alive", f.comment)
	}
}

// TestLiveAcrossFullTrim empties the stream under a subscription that has
// read everything: nothing it needs was lost, so the events written after
// the trim arrive with no reset, also to a client that reconnects with its
// cursor. One that was behind gets a single reset and then the new events.
func TestLiveAcrossFullTrim(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RingSize = 4
	b := setup(t, cfg)
	b.register(t, "q")
	b.waitReaders(t, "q")
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()

	live, err := b.hub.Subscribe(b.ctx, Filter{Queues: []string{"q"}}, nil)
	require.NoError(t, err)
	defer live.Close()

	sub, err := b.hub.Subscribe(b.ctx, Filter{Queues: []string{"q"}}, nil)
	require.NoError(t, err)
	evs := make([]ev, 10)
	for i := range evs {
		evs[i] = taskEvent(TypeTaskQueued)
	}
	first := b.add(t, "q", evs...)
	var caughtUp string // the cursor of a client that read everything, then left
	for _, id := range first {
		e, err := live.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, "q/"+id, e.ID)
		caughtUp = e.Cursor
	}
	// A client that had read only the first event.
	e, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "q/"+first[0], e.ID)
	sub.Close()
	cur, err := ParseCursor(e.Cursor)
	require.NoError(t, err)

	require.NoError(t, b.rc.XTrimMaxLen(b.ctx, b.keys.Events("q"), 0).Err())
	behind, err := b.hub.Subscribe(b.ctx, Filter{Queues: []string{"q"}}, cur)
	require.NoError(t, err)
	defer behind.Close()
	_, err = behind.Next(ctx)
	var re *ResetError
	require.ErrorAs(t, err, &re)
	// Several rounds, so that the ring turns over past the trim.
	var all []string
	for round := range 3 {
		ids := b.add(t, "q", taskEvent(TypeTaskQueued), taskEvent(TypeTaskStarted), taskEvent(TypeTaskSucceeded))
		for _, id := range ids {
			e, err := live.Next(ctx)
			require.NoError(t, err, "round %d", round)
			require.Equal(t, "q/"+id, e.ID, "round %d", round)
		}
		for _, id := range ids {
			e, err := behind.Next(ctx)
			require.NoError(t, err, "round %d", round)
			require.Equal(t, "q/"+id, e.ID, "round %d", round)
		}
		all = append(all, ids...)
	}

	cur, err = ParseCursor(caughtUp)
	require.NoError(t, err)
	back, err := b.hub.Subscribe(b.ctx, Filter{Queues: []string{"q"}}, cur)
	require.NoError(t, err)
	defer back.Close()
	for _, id := range all {
		e, err := back.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, "q/"+id, e.ID)
	}
	require.Equal(t, int64(1), b.hub.Stats().Resets)
}

// TestReaderParksWithoutSubscribers checks that a queue's reader reads
// nothing while nobody subscribes, that "from now" still means now, and
// that a client resuming after a parked spell gets what it missed.
func TestReaderParksWithoutSubscribers(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig())
	b.register(t, "q")
	b.waitReaders(t, "q")
	b.hub.mu.Lock()
	r := b.hub.readers["q"]
	b.hub.mu.Unlock()
	parked := func() bool { _, _, ready := r.tail(); return !ready }
	require.Eventually(t, parked, 10*time.Second, 5*time.Millisecond)
	b.add(t, "q", taskEvent(TypeTaskQueued), taskEvent(TypeTaskQueued))
	reads := b.hub.Stats().CatchupReads

	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	sub, err := b.hub.Subscribe(ctx, Filter{Queues: []string{"q"}}, nil)
	require.NoError(t, err)
	ids := b.add(t, "q", taskEvent(TypeTaskStarted))
	e, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "q/"+ids[0], e.ID, "from now: nothing from before the subscription")
	require.False(t, parked())
	sub.Close()

	require.Eventually(t, parked, 10*time.Second, 5*time.Millisecond)
	missed := b.add(t, "q", taskEvent(TypeTaskSucceeded), taskEvent(TypeTaskQueued))
	cur, err := ParseCursor(e.Cursor)
	require.NoError(t, err)
	back, err := b.hub.Subscribe(ctx, Filter{Queues: []string{"q"}}, cur)
	require.NoError(t, err)
	defer back.Close()
	for _, id := range missed {
		e, err := back.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, "q/"+id, e.ID)
	}
	require.Greater(t, b.hub.Stats().CatchupReads, reads, "what it missed came from Redis")
}

// TestSinceStartsAtATime opens the feed at a point in time: what was written
// before it is skipped, what came after is delivered (a task page showing a
// task's whole history asks for since=<created_at>).
func TestSinceStartsAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig())
	b.register(t, "q")
	b.waitReaders(t, "q")
	key := b.keys.Events("q")
	for _, id := range []string{"1000-1", "1000-2", "2000-1", "2500-0"} {
		require.NoError(t, b.rc.XAdd(b.ctx, &redis.XAddArgs{Stream: key, ID: id,
			Values: []any{"type", TypeTaskQueued, "task_id", rdb.NewTaskID(1, time.Now()), "task_type", "echo", "attempt", "1", "ts", "1000"}}).Err())
	}
	c := b.openSSE(t, "?queue=q&since=1970-01-01T00:00:01.5Z", "")
	c.start(t)
	require.Equal(t, "q/2000-1", envelopeOf(t, c.nextEvent(t).data)["event_id"])
	require.Equal(t, "q/2500-0", envelopeOf(t, c.nextEvent(t).data)["event_id"])
	c.close()

	_, resp := b.tryOpenSSE(t, "?since=soon", "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestPartitionedQueueFeed: a queue=hot feed of a queue with 4 partitions
// delivers its partitions' events, named by the queue, with event ids that
// name the partition; the cursor holds a position per partition and resumes
// exactly once.
func TestPartitionedQueueFeed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	d := openDeployment(t, b.rc, b.keys.Prefix())
	admin, err := d.NewAdmin(nil)
	require.NoError(t, err)
	_, err = admin.CreateQueue(b.ctx, "hot", &dtq.QueueOptions{Partitions: 4})
	require.NoError(t, err)
	parts, err := b.rdb.Partitions(b.ctx, "hot", false)
	require.NoError(t, err)
	b.waitReaders(t, parts...)
	c := b.openSSE(t, "?queue=hot", "")
	c.start(t)

	cl, err := d.NewClient(nil)
	require.NoError(t, err)
	submitted := map[string]bool{}
	for range 8 {
		res, err := cl.Submit(b.ctx, dtq.Submission{Queue: "hot", Type: "job"})
		require.NoError(t, err)
		submitted[res.TaskID] = true
	}
	seen := map[string]bool{}
	partitions := map[string]bool{}
	var last string
	for len(seen) < len(submitted) {
		f := c.nextEvent(t)
		env := envelopeOf(t, f.data)
		require.Equal(t, "hot", env["queue"])
		require.True(t, submitted[env["task_id"].(string)])
		require.Regexp(t, `^hot(#[1-3])?/\d+-\d+$`, env["event_id"])
		p, _, _ := strings.Cut(env["event_id"].(string), "/")
		partitions[p] = true
		seen[env["task_id"].(string)] = true
		last = f.id
	}
	require.Len(t, partitions, 4, "events of every partition")
	cur, err := ParseCursor(last)
	require.NoError(t, err)
	for _, p := range parts {
		require.NotEqual(t, idBefore(cur.start), cur.position(p), "a position for partition %s", p)
	}

	// Resuming from the last cursor delivers the next event only.
	c.close()
	res, err := cl.Submit(b.ctx, dtq.Submission{Queue: "hot", Type: "job"})
	require.NoError(t, err)
	c = b.openSSE(t, "?queue=hot", last)
	f := c.nextEvent(t)
	require.Equal(t, res.TaskID, envelopeOf(t, f.data)["task_id"])
}
