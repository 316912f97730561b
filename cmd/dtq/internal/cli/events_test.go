package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// tailCmd is `dtq events tail` running in the background.
type tailCmd struct {
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan int
}

func startTail(t *testing.T, vars map[string]string, args ...string) *tailCmd {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tc := &tailCmd{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	e := &env{stdout: tc.stdout, stderr: tc.stderr, lookupEnv: mapEnv(vars)}
	go func() { tc.done <- execute(ctx, append([]string{"events", "tail"}, args...), e) }()
	t.Cleanup(func() { tc.stop(t) })
	return tc
}

// stop cancels the command as SIGINT would and returns its exit code.
func (tc *tailCmd) stop(t *testing.T) int {
	t.Helper()
	tc.cancel()
	select {
	case code := <-tc.done:
		tc.done <- code // later calls see it too
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("events tail did not stop")
		return -1
	}
}

// waitMatch waits until stdout matches the regular expression re.
func (tc *tailCmd) waitMatch(t *testing.T, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	require.Eventually(t, func() bool { return rx.MatchString(tc.stdout.String()) }, 20*time.Second, 5*time.Millisecond,
		"stdout never matched %q; stdout:\n%s\nstderr:\n%s", re, tc.stdout, tc.stderr)
}

// waitOutput waits until stdout holds want.
func (tc *tailCmd) waitOutput(t *testing.T, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(tc.stdout.String(), want) }, 20*time.Second, 5*time.Millisecond,
		"stdout never held %q; stdout:\n%s\nstderr:\n%s", want, tc.stdout, tc.stderr)
}

// TestEventsTailLive follows the API's real feed: events of a task as a
// worker runs it, table and JSON.
func TestEventsTailLive(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.startWorker(t, "cli-events-worker", "feed")
	first := b.submit(t, dtq.Submission{Queue: "feed", Type: "echo"}) // registers the queue

	// Start from a known position, so that nothing before it is printed and
	// nothing after it is missed however long the command takes to connect.
	cursor := firstSSEID(t, b.srv.URL+"/api/v1/events?queue=feed")
	id := b.submit(t, dtq.Submission{Queue: "feed", Type: "echo", Payload: map[string]any{"n": 1}})

	table := startTail(t, b.vars, "--queue", "feed", "--cursor", cursor)
	asJSON := startTail(t, b.vars, "--task-id", id, "--cursor", cursor, "-o", "json")
	// The first task's history, from before this command ran.
	history := startTail(t, b.vars, "--task-id", first, "--since", time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
	// The table may also print the first task's events: wait for this one's.
	table.waitMatch(t, `TASK_SUCCEEDED\s+feed\s+echo\s+`+id)
	asJSON.waitOutput(t, "TASK_SUCCEEDED")
	history.waitOutput(t, "TASK_SUCCEEDED")
	require.Equal(t, 0, table.stop(t))
	require.Equal(t, 0, asJSON.stop(t))
	require.Equal(t, 0, history.stop(t))
	require.Contains(t, history.stdout.String(), "TASK_QUEUED")

	var types []string
	tableLines := lines(table.stdout.String())
	require.Equal(t, []string{"TIME", "EVENT", "QUEUE", "TASK_TYPE", "TASK_ID", "ATTEMPT", "WORKER", "DETAIL"}, strings.Fields(tableLines[0]))
	for _, l := range tableLines[1:] {
		f := strings.Fields(l)
		if f[1] == "TASK_SUCCEEDED" {
			require.Len(t, f, 8, l)
			require.Regexp(t, `^duration_ms=\d+$`, f[7], "the event's metadata")
		} else {
			require.Len(t, f, 7, l) // no metadata
		}
		require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, f[0])
		if f[4] == first {
			continue // a feed that just learnt of the queue may start a little early
		}
		require.Equal(t, []string{"feed", "echo", id, "1"}, f[2:6], l)
		if f[1] == "TASK_QUEUED" {
			require.Equal(t, "-", f[6], "no worker yet")
		} else {
			require.Equal(t, "cli-events-worker", f[6])
		}
		types = append(types, f[1])
	}
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"}, types)

	var got []string
	for _, l := range lines(asJSON.stdout.String()) {
		var env map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &env), l)
		require.Equal(t, id, env["task_id"])
		require.Equal(t, "echo", env["task_type"])
		require.Contains(t, env["event_id"], "feed/")
		got = append(got, env["type"].(string))
	}
	require.Equal(t, types, got)
	require.Empty(t, table.stderr.String())

	// A bad filter is refused before the stream starts; the feed needs a
	// key.
	code, stdout, stderr := b.run(t, "events", "tail", "--type", "NOT_A_TYPE")
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Regexp(t, `^dtq: INVALID_REQUEST: type .*\n$`, stderr)
	code, stdout, stderr = b.runWith(t, map[string]string{"DTQ_TOKEN": ""}, "events", "tail")
	requireAPIError(t, code, stdout, stderr, "UNAUTHORIZED")

	// A reader key is enough.
	reader := startTail(t, map[string]string{"DTQ_API_URL": b.srv.URL, "DTQ_TOKEN": readerToken}, "--queue", "feed", "--cursor", cursor)
	reader.waitOutput(t, "TASK_SUCCEEDED")
	require.Equal(t, 0, reader.stop(t))
}

// firstSSEID opens the feed and returns the id of its opening frame: the
// feed's position now.
func firstSSEID(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+readerToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			return id
		}
	}
	t.Fatalf("the feed sent no id: %v", sc.Err())
	return ""
}

// fakeFeed is an SSE endpoint that serves scripted frames: each connection
// gets the next script, and the connection is dropped when it ends (the
// last one is held open until the client leaves).
type fakeFeed struct {
	mu       sync.Mutex
	scripts  []string
	requests []*http.Request
}

func (f *fakeFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, r.Clone(context.Background()))
	var script string
	last := n >= len(f.scripts)-1
	if n < len(f.scripts) {
		script = f.scripts[n]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = w.Write([]byte(script))
	w.(http.Flusher).Flush()
	if last {
		<-r.Context().Done()
	}
}

func (f *fakeFeed) seen() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.requests...)
}

func sseEvent(id, typ, data string) string {
	return fmt.Sprintf("id: %s\nevent: %s\ndata: %s\n\n", id, typ, data)
}

// TestEventsTailReconnects drops the stream twice: the command resumes
// with Last-Event-ID from the last id it saw (an event's, or a keep-alive's
// without data), reports a reset on stderr, and stops with exit 0 when its
// context ends.
func TestEventsTailReconnects(t *testing.T) {
	t.Parallel()
	ev1 := `{"event_id":"q/1-0","ts":"2026-11-30T04:05:57.274Z","type":"TASK_QUEUED","task_id":"01a22aa1819a7000b3e1e8a7a4900001","queue":"q","task_type":"echo","attempt":1,"worker_id":null,"metadata":{}}`
	ev2 := `{"event_id":"q/2-0","ts":"2026-11-30T04:05:57.301Z","type":"TASK_STARTED","task_id":"01a22aa1819a7000b3e1e8a7a4900001","queue":"q","task_type":"echo","attempt":1,"worker_id":"w-1","metadata":{}}`
	ev3 := `{"event_id":"_sys/3-0","ts":"2026-11-30T04:05:58.000Z","type":"WORKER_STOPPED","task_id":null,"queue":null,"task_type":null,"attempt":null,"worker_id":"w-1","metadata":{}}`
	feed := &fakeFeed{scripts: []string{
		"retry: 2000\nid: c0\n\n" + sseEvent("c1", "TASK_QUEUED", ev1) + ": keep-alive\nid: c1b\n\n",
		"retry: 2000\nid: c1b\n\n" + sseEvent("c2", "TASK_STARTED", ev2) +
			sseEvent("c9", "reset", `{"cursor":"c9","queue":"q","reason":"trimmed"}`) + "id: c99\n",
		"retry: 2000\nid: c9\n\n:comment\n" + "id: c10\nevent: WORKER_STOPPED\ndata: " + ev3 + "\r\n\r\n",
	}}
	srv := httptest.NewServer(feed)
	defer srv.Close()
	tc := startTail(t, map[string]string{"DTQ_API_URL": srv.URL, "DTQ_TOKEN": "tok"}, "--queue", "q,_sys", "--cursor", "start")
	tc.waitOutput(t, "WORKER_STOPPED")
	require.Equal(t, 0, tc.stop(t))

	// One header, even across reconnects.
	require.Equal(t, ""+
		"TIME                      EVENT                    QUEUE             TASK_TYPE         TASK_ID                           ATTEMPT  WORKER            DETAIL\n"+
		"2026-11-30T04:05:57.274Z  TASK_QUEUED              q                 echo              01a22aa1819a7000b3e1e8a7a4900001  1        -\n"+
		"2026-11-30T04:05:57.301Z  TASK_STARTED             q                 echo              01a22aa1819a7000b3e1e8a7a4900001  1        w-1\n"+
		"2026-11-30T04:05:58.000Z  WORKER_STOPPED           -                 -                 -                                 -        w-1\n",
		tc.stdout.String())
	stderr := tc.stderr.String()
	require.Equal(t, 2, strings.Count(stderr, "dtq: event stream interrupted (the API closed the stream); reconnecting\n"), stderr)
	require.Contains(t, stderr, "dtq: events of queue q were trimmed before they could be read; continuing from the live end\n")

	reqs := feed.seen()
	require.Len(t, reqs, 3)
	require.Equal(t, "cursor=start&queue=q%2C_sys", reqs[0].URL.RawQuery)
	require.Empty(t, reqs[0].Header.Get("Last-Event-ID"))
	require.Equal(t, "queue=q%2C_sys", reqs[1].URL.RawQuery)
	require.Equal(t, "c1b", reqs[1].Header.Get("Last-Event-ID"))
	// The stream ended inside a frame: the unfinished frame's id does not
	// count.
	require.Equal(t, "c9", reqs[2].Header.Get("Last-Event-ID"))
	for _, r := range reqs {
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		require.Equal(t, "text/event-stream", r.Header.Get("Accept"))
	}
}

func TestEventsTailFailures(t *testing.T) {
	t.Parallel()
	// Before the first stream, failures end the command at once.
	code, _, stderr := runCmd(t, map[string]string{"DTQ_API_URL": "http://127.0.0.1:1"}, "events", "tail")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "dtq: cannot reach the dtq API at http://127.0.0.1:1")

	notSSE := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer notSSE.Close()
	code, _, stderr = runCmd(t, map[string]string{"DTQ_API_URL": notSSE.URL}, "events", "tail")
	require.Equal(t, 1, code)
	require.Equal(t, "dtq: the API at "+notSSE.URL+" answered GET /api/v1/events with \"application/json\", not an event stream\n", stderr)

	// After a drop, a 401 is not retried.
	var calls int
	var mu sync.Mutex
	revoked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("id: c0\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"code":"UNAUTHORIZED","message":"missing or unknown API key","details":{},"request_id":"r-2"}`))
	}))
	defer revoked.Close()
	code, _, stderr = runCmd(t, map[string]string{"DTQ_API_URL": revoked.URL}, "events", "tail")
	require.Equal(t, 1, code)
	require.Equal(t, "dtq: event stream interrupted (the API closed the stream); reconnecting\n"+
		"dtq: UNAUTHORIZED: missing or unknown API key (request r-2)\n", stderr)
}

func TestSSEFrame(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		lines []string
		id    string
		hasID bool
		event string
		data  string
	}{
		{"event", []string{"id: 7", "event: TASK_QUEUED", "data: {}"}, "7", true, "TASK_QUEUED", "{}"},
		{"no space after colon", []string{"id:7", "data:x"}, "7", true, "", "x"},
		{"multi-line data", []string{"data: a", "data: b"}, "", false, "", "a\nb"},
		{"comment and unknown field", []string{": keep-alive", "retry: 10", "foo: bar"}, "", false, "", ""},
		{"empty id", []string{"id:"}, "", true, "", ""},
		{"id with NUL ignored", []string{"id: a\x00b"}, "", false, "", ""},
	}
	for _, tt := range tests {
		var f sseFrame
		for _, l := range tt.lines {
			require.False(t, f.add(l), tt.name)
		}
		require.True(t, f.add(""), tt.name)
		require.Equal(t, tt.id, f.id, tt.name)
		require.Equal(t, tt.hasID, f.hasID, tt.name)
		require.Equal(t, tt.event, f.event, tt.name)
		require.Equal(t, tt.data, f.data.String(), tt.name)
	}
}
