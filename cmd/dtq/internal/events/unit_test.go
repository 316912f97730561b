package events

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestParseStreamID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want streamID
		ok   bool
	}{
		{"0-0", streamID{}, true},
		{"1700000000000-3", streamID{1700000000000, 3}, true},
		{"5-18446744073709551615", streamID{5, math.MaxUint64}, true},
		{"5", streamID{}, false},
		{"", streamID{}, false},
		{"a-1", streamID{}, false},
		{"1-b", streamID{}, false},
		{"-1-2", streamID{}, false},
		{"1-2-3", streamID{}, false},
	} {
		got, err := parseStreamID(tc.in)
		if !tc.ok {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
		require.Equal(t, tc.in, got.String())
	}
}

func TestStreamIDOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b streamID
		want int
	}{
		{streamID{1, 0}, streamID{1, 0}, 0},
		{streamID{1, 5}, streamID{2, 0}, -1},
		{streamID{2, 0}, streamID{1, 9}, 1},
		{streamID{3, 1}, streamID{3, 2}, -1},
		{idBefore(10), streamID{10, 0}, -1},
		{idBefore(10), streamID{9, 12345}, 1},
		{idBefore(0), streamID{}, 0},
	} {
		require.Equal(t, tc.want, tc.a.compare(tc.b), "%v vs %v", tc.a, tc.b)
	}
}

func TestStreamStateGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		st   streamState
		want streamID
	}{
		{"no stream", streamState{}, streamID{}},
		{"nothing removed", streamState{exists: true, length: 3, entriesAdded: 3, first: streamID{5, 0}}, streamID{}},
		{"trimmed", streamState{exists: true, length: 3, entriesAdded: 9, first: streamID{5, 2}}, streamID{5, 1}},
		{"trimmed at a new ms", streamState{exists: true, length: 3, entriesAdded: 9, first: streamID{5, 0}}, idBefore(5)},
		{"all removed", streamState{exists: true, length: 0, entriesAdded: 9, lastGenerated: streamID{8, 0}}, streamID{8, 0}},
		{"xdel after the first", streamState{exists: true, length: 3, entriesAdded: 4, first: streamID{5, 0},
			maxDeleted: streamID{7, 0}}, streamID{7, 0}},
	} {
		require.Equal(t, tc.want, tc.st.gone(), tc.name)
	}
}

func TestStreamStateTrimmedAfter(t *testing.T) {
	t.Parallel()
	// Nine entries were added: 8-1 … 8-9 here, then trimmed or deleted.
	emptied := streamState{exists: true, length: 0, entriesAdded: 9, lastGenerated: streamID{8, 9}}
	refilled := streamState{exists: true, length: 2, entriesAdded: 11, first: streamID{9, 0}, lastGenerated: streamID{9, 1}}
	trimmed := streamState{exists: true, length: 4, entriesAdded: 11, first: streamID{8, 8}, lastGenerated: streamID{9, 1}}
	holed := refilled
	holed.maxDeleted = streamID{9, 0}
	for _, tc := range []struct {
		name   string
		st     streamState
		pos    streamID
		posOrd int64
		want   bool
	}{
		{"emptied, read to the end", emptied, streamID{8, 9}, 9, false},
		{"emptied, behind", emptied, streamID{8, 5}, 5, true},
		{"emptied, behind, no ordinal", emptied, streamID{8, 5}, unknownOrd, true},
		{"refilled, had read everything before", refilled, streamID{8, 9}, 9, false},
		{"refilled, no ordinal: assume the worst", refilled, streamID{8, 9}, unknownOrd, true},
		{"refilled, behind", refilled, streamID{8, 7}, 7, true},
		{"trimmed up to pos", trimmed, streamID{8, 7}, 7, false},
		{"trimmed past pos", trimmed, streamID{8, 6}, 6, true},
		{"deleted after pos", holed, streamID{8, 9}, 9, true},
		{"another stream's history", refilled, streamID{8, 9}, 40, true},
		{"at the newest", refilled, streamID{9, 1}, unknownOrd, false},
	} {
		require.Equal(t, tc.want, tc.st.trimmedAfter(tc.pos, tc.posOrd), tc.name)
	}
}

func TestStreamStateFirstOrd(t *testing.T) {
	t.Parallel()
	refilled := streamState{exists: true, length: 5, entriesAdded: 12, first: streamID{9, 0}, lastGenerated: streamID{9, 4}}
	holed := refilled
	holed.maxDeleted = streamID{9, 2}
	for _, tc := range []struct {
		name        string
		st          streamState
		first, last streamID
		n           int
		pos         streamID
		posOrd      int64
		want        int64
	}{
		{"the oldest held", refilled, streamID{9, 0}, streamID{9, 1}, 2, streamID{8, 1}, unknownOrd, 8},
		{"up to the newest", refilled, streamID{9, 3}, streamID{9, 4}, 2, streamID{9, 2}, unknownOrd, 11},
		{"after a known position", refilled, streamID{9, 2}, streamID{9, 3}, 2, streamID{9, 1}, 9, 10},
		{"nothing to go by", refilled, streamID{9, 2}, streamID{9, 3}, 2, streamID{9, 1}, unknownOrd, unknownOrd},
		{"holes among them", holed, streamID{9, 0}, streamID{9, 4}, 4, streamID{8, 1}, unknownOrd, unknownOrd},
		{"more than were ever added", refilled, streamID{9, 2}, streamID{9, 3}, 2, streamID{9, 1}, 11, unknownOrd},
	} {
		require.Equal(t, tc.want, tc.st.firstOrd(tc.first, tc.last, tc.n, tc.pos, tc.posOrd), tc.name)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1700000000000)
	c := NewCursor(start)
	require.Equal(t, idBefore(1700000000000), c.position("emails"))
	c.setAt("emails", streamID{1700000000005, 2}, 42)
	c.set(SysQueue, streamID{1700000000001, 0})
	c.set("idle", idBefore(1700000000000)) // the implied position is not stored

	back, err := ParseCursor(c.String())
	require.NoError(t, err)
	require.Equal(t, start, back.Start())
	require.Equal(t, streamID{1700000000005, 2}, back.position("emails"))
	require.Equal(t, int64(42), back.ordinal("emails"))
	require.Equal(t, int64(unknownOrd), back.ordinal(SysQueue))
	require.Equal(t, streamID{1700000000001, 0}, back.position(SysQueue))
	require.Equal(t, idBefore(1700000000000), back.position("later"), "unknown queues read from the start")
	require.Len(t, back.pos, 2)
	require.Equal(t, c.String(), back.String(), "the encoding is deterministic")
}

func TestParseCursorRejects(t *testing.T) {
	t.Parallel()
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for name, in := range map[string]string{
		"not base64":   "%%%",
		"not json":     enc("hello"),
		"wrong shape":  enc(`[1,2]`),
		"no version":   enc(`{"t":1}`),
		"version 2":    enc(`{"v":2,"t":1}`),
		"bad queue":    enc(`{"v":1,"t":1,"p":{"Bad Queue":"1-0"}}`),
		"bad position": enc(`{"v":1,"t":1,"p":{"q":"12"}}`),
		"negative":     enc(`{"v":1,"t":-5}`),
		"bad ordinal":  enc(`{"v":1,"t":1,"p":{"q":"1-0"},"o":{"q":-3}}`),
	} {
		_, err := ParseCursor(in)
		require.ErrorIs(t, err, ErrBadCursor, name)
	}
}

func FuzzParseCursor(f *testing.F) {
	c := NewCursor(time.UnixMilli(1700000000000))
	c.set("q", streamID{1700000000001, 1})
	f.Add(c.String())
	c.setAt("q", streamID{1700000000001, 2}, 7)
	f.Add(c.String())
	f.Add("")
	f.Add("eyJ2IjoxfQ")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			return
		}
		back, err := ParseCursor(c.String())
		require.NoError(t, err)
		require.Equal(t, c.String(), back.String())
	})
}

func TestDecodeEntry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		queue string
		msg   redis.XMessage
		want  string
	}{
		{"task event", "emails", redis.XMessage{ID: "1700000000000-1", Values: map[string]any{
			"type": "TASK_RETRY_SCHEDULED", "task_id": "0190a0b0c0d07000800000000000a001", "task_type": "send",
			"attempt": "2", "ts": "1700000000123", "worker_id": "w1",
			"meta": `{"retry_delay_ms":1000,"next_attempt":3,"error_class":"Timeout"}`}},
			`{"event_id":"emails/1700000000000-1","ts":"2023-11-14T22:13:20.123Z","type":"TASK_RETRY_SCHEDULED",` +
				`"task_id":"0190a0b0c0d07000800000000000a001","queue":"emails","task_type":"send","attempt":2,"worker_id":"w1",` +
				`"metadata":{"retry_delay_ms":1000,"next_attempt":3,"error_class":"Timeout"}}`},
		{"queue event", "emails", redis.XMessage{ID: "1700000000000-2", Values: map[string]any{
			"type": "QUEUE_PAUSED", "task_id": "", "task_type": "", "attempt": "0", "ts": "1700000000000",
			"meta": `{"actor":"ops"}`}},
			`{"event_id":"emails/1700000000000-2","ts":"2023-11-14T22:13:20.000Z","type":"QUEUE_PAUSED",` +
				`"task_id":null,"queue":"emails","task_type":null,"attempt":null,"worker_id":null,"metadata":{"actor":"ops"}}`},
		{"worker event", SysQueue, redis.XMessage{ID: "1700000000000-0", Values: map[string]any{
			"type": "WORKER_STARTED", "worker_id": "w1", "ts": "1700000000000"}},
			`{"event_id":"_sys/1700000000000-0","ts":"2023-11-14T22:13:20.000Z","type":"WORKER_STARTED",` +
				`"task_id":null,"queue":null,"task_type":null,"attempt":null,"worker_id":"w1","metadata":{}}`},
		{"empty lua table and no ts", "q", redis.XMessage{ID: "1700000000999-0", Values: map[string]any{
			"type": "TASK_STARTED", "task_id": "0190a0b0c0d07000800000000000a001", "task_type": "t", "attempt": "1",
			"meta": "[]"}},
			`{"event_id":"q/1700000000999-0","ts":"2023-11-14T22:13:20.999Z","type":"TASK_STARTED",` +
				`"task_id":"0190a0b0c0d07000800000000000a001","queue":"q","task_type":"t","attempt":1,"worker_id":null,"metadata":{}}`},
	} {
		e, err := decodeEntry(tc.queue, tc.msg)
		require.NoError(t, err, tc.name)
		require.JSONEq(t, tc.want, string(e.data), tc.name)

		var env Envelope
		require.NoError(t, json.Unmarshal(e.data, &env), tc.name)
		again, err := json.Marshal(env)
		require.NoError(t, err)
		require.JSONEq(t, tc.want, string(again), "%s: Envelope round-trips", tc.name)
	}
}

func TestFilterMatch(t *testing.T) {
	t.Parallel()
	task := &entry{queue: "q", typ: TypeTaskQueued, taskID: "a"}
	other := &entry{queue: "q", typ: TypeTaskSucceeded, taskID: "b"}
	worker := &entry{queue: SysQueue, typ: TypeWorkerStarted}
	for _, tc := range []struct {
		name   string
		f      Filter
		reads  map[string]bool
		passes []*entry
		drops  []*entry
	}{
		{"everything", Filter{}, map[string]bool{"q": true, SysQueue: true}, []*entry{task, other, worker}, nil},
		{"one queue", Filter{Queues: []string{"q"}}, map[string]bool{"q": true, "r": false, SysQueue: false}, []*entry{task}, nil},
		{"worker events", Filter{Queues: []string{SysQueue}}, map[string]bool{"q": false, SysQueue: true}, []*entry{worker}, nil},
		{"task", Filter{TaskID: "a"}, map[string]bool{"q": true, SysQueue: false}, []*entry{task}, []*entry{other, worker}},
		{"types", Filter{Types: []string{TypeTaskSucceeded, TypeWorkerStarted}}, map[string]bool{"q": true, SysQueue: true},
			[]*entry{other, worker}, []*entry{task}},
	} {
		for q, want := range tc.reads {
			require.Equal(t, want, tc.f.readsQueue(q), "%s reads %s", tc.name, q)
		}
		for _, e := range tc.passes {
			require.True(t, tc.f.match(e), "%s passes %v", tc.name, e)
		}
		for _, e := range tc.drops {
			require.False(t, tc.f.match(e), "%s drops %v", tc.name, e)
		}
	}
}

func TestParseRequest(t *testing.T) {
	t.Parallel()
	good := NewCursor(time.UnixMilli(1700000000000)).String()
	other := NewCursor(time.UnixMilli(1800000000000)).String()
	for _, tc := range []struct {
		query, lastEventID string
		field              string // "" = accepted
		want               Filter
		cursor             string
	}{
		{query: "", want: Filter{}},
		{query: "?queue=a,b,a&type=TASK_QUEUED&task_id=0190a0b0c0d07000800000000000a001",
			want: Filter{Queues: []string{"a", "b"}, Types: []string{TypeTaskQueued}, TaskID: "0190a0b0c0d07000800000000000a001"}},
		{query: "?queue=_sys", want: Filter{Queues: []string{SysQueue}}},
		{query: "?queue=&type=", want: Filter{}},
		{query: "?cursor=" + good, cursor: good},
		{query: "?cursor=" + good, lastEventID: other, cursor: other},
		{query: "?queue=Bad", field: "queue"},
		{query: "?type=TASK_DONE", field: "type"},
		{query: "?task_id=xyz", field: "task_id"},
		{query: "?cursor=nope", field: "cursor"},
		{query: "", lastEventID: "nope", field: "Last-Event-ID"},
		{query: "?queue=a&queue=b", field: "queue"},
		{query: "?since=1700000000000", cursor: good},
		{query: "?since=2023-11-14T22:13:20Z", cursor: good},
		{query: "?since=2023-11-14T22:13:20.000%2B00:00", cursor: good},
		{query: "?since=1700000000000&cursor=" + other, cursor: other},
		{query: "?since=1700000000000", lastEventID: other, cursor: other},
		{query: "?since=yesterday", field: "since"},
		{query: "?since=-5", field: "since"},
		{query: "?since=1&since=2", field: "since"},
		{query: "?from=1", field: "from"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/events"+tc.query, nil)
		if tc.lastEventID != "" {
			r.Header.Set("Last-Event-ID", tc.lastEventID)
		}
		req, fe := parseRequest(r)
		if tc.field != "" {
			require.NotNil(t, fe, tc.query)
			require.Equal(t, tc.field, fe.Field, tc.query)
			continue
		}
		require.Nil(t, fe, tc.query)
		require.Equal(t, tc.want, req.filter, tc.query)
		if tc.cursor == "" {
			require.Nil(t, req.cursor)
		} else {
			require.Equal(t, tc.cursor, req.cursor.String())
		}
	}
}

func TestRing(t *testing.T) {
	t.Parallel()
	h := &Hub{cfg: Config{RingSize: 3}}
	r := newReader(h, "q", "k")
	_, st := r.after(streamID{}, 10)
	require.Equal(t, readNotReady, st)

	r.start(streamState{exists: true, lastGenerated: streamID{10, 0}})
	_, st = r.after(streamID{9, 0}, 10)
	require.Equal(t, readMiss, st, "older than the reader's start")
	es, st := r.after(streamID{10, 0}, 10)
	require.Equal(t, readOK, st)
	require.Empty(t, es)

	mk := func(ms ...uint64) []*entry {
		var out []*entry
		for _, m := range ms {
			out = append(out, &entry{id: streamID{m, 0}})
		}
		return out
	}
	ids := func(es []*entry) []uint64 {
		var out []uint64
		for _, e := range es {
			out = append(out, e.id.ms)
		}
		return out
	}
	r.add(mk(11, 12), streamState{})
	es, _ = r.after(streamID{10, 0}, 10)
	require.Equal(t, []uint64{11, 12}, ids(es))
	es, _ = r.after(streamID{11, 0}, 10)
	require.Equal(t, []uint64{12}, ids(es))
	es, _ = r.after(streamID{10, 0}, 1)
	require.Equal(t, []uint64{11}, ids(es), "limit")

	r.add(mk(13, 14, 15), streamState{})
	_, st = r.after(streamID{11, 0}, 10)
	require.Equal(t, readMiss, st, "11 and 12 left the ring")
	es, st = r.after(streamID{12, 0}, 10)
	require.Equal(t, readOK, st)
	require.Equal(t, []uint64{13, 14, 15}, ids(es))
	es, _ = r.after(streamID{99, 0}, 10)
	require.Empty(t, es, "a position ahead of the reader gets nothing yet")

	// Redis trimmed past the reader: the ring restarts after the trimmed part.
	r.add(mk(30, 31), streamState{exists: true, length: 2, entriesAdded: 9, first: streamID{21, 0}})
	_, st = r.after(streamID{15, 0}, 10)
	require.Equal(t, readMiss, st)
	_, st = r.after(streamID{20, 5}, 10)
	require.Equal(t, readMiss, st)
	es, _ = r.after(idBefore(21), 10)
	require.Equal(t, []uint64{30, 31}, ids(es))
}
