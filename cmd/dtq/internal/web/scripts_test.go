package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/cmd/dtq/internal/web"
)

// scriptTab loads the dashboard page alone (no API behind it) so that its
// modules can be imported and their functions called.
func scriptTab(t *testing.T) *tab {
	t.Helper()
	srv := httptest.NewServer(web.Handler())
	t.Cleanup(srv.Close)
	tb := newTab(t, &bundle{url: srv.URL})
	tb.open("/")
	tb.waitFor(`document.querySelector('script[type=module]')`)
	return tb
}

// run evaluates an async function body with `mod(name)` importing one of
// the dashboard's modules, and decodes what it returns.
func run[T any](tb *tab, body string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	expr := `(async () => {
		const base = document.querySelector('script[type=module]').src.replace(/main\.js$/, '');
		const mod = name => import(base + name);
		` + body + `
	})()`
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	require.NoError(tb.t, err)
	return v
}

func TestPercentileEstimates(t *testing.T) {
	t.Parallel()
	tb := scriptTab(t)
	tests := []struct {
		name    string
		buckets string
		want    []any // p50, p95, p99 in ms; nil when there are no samples
	}{
		{"no samples", `{}`, []any{nil, nil, nil}},
		{"zero-width first bucket", `{"lt_1ms": 10}`, []any{0.5, 0.95, 0.99}},
		{"one bucket interpolates", `{"lt_1024ms": 100}`, []any{768.0, 998.4, 1018.88}},
		{"two buckets", `{"lt_2ms": 50, "lt_8ms": 50}`, []any{2.0, 7.6, 7.92}},
		{"unknown labels are ignored", `{"other": 5, "lt_4ms": 4}`, []any{3.0, 3.9, 3.98}},
	}
	for _, tt := range tests {
		got := run[[]any](tb, fmt.Sprintf(`const {percentiles} = await mod('pages/common.js');
			return percentiles(%s, [0.5, 0.95, 0.99]).values.map(v => v === null ? null : Math.round(v * 100) / 100);`, tt.buckets))
		require.Equal(t, tt.want, got, tt.name)
	}
}

// TestFeedParser feeds Server-Sent Events text, cut into chunks at awkward
// places, to the dashboard's feed reader.
func TestFeedParser(t *testing.T) {
	t.Parallel()
	tb := scriptTab(t)
	tests := []struct {
		name       string
		chunks     []string
		wantEvents []string // event_id of each event, "reset:<cursor>" for resets
		wantCursor string
		wantRetry  int
	}{
		{
			name:       "first frame sets the cursor and the retry delay",
			chunks:     []string{"retry: 2000\nid: c0\n\n"},
			wantCursor: "c0", wantRetry: 2000,
		},
		{
			name: "events and their cursors",
			chunks: []string{
				"id: c1\nevent: TASK_QUEUED\ndata: {\"event_id\":\"q/1-0\"}\n\n",
				"id: c2\nevent: TASK_STARTED\ndata: {\"event_id\":\"q/2-0\"}\n\n",
			},
			wantEvents: []string{"q/1-0", "q/2-0"}, wantCursor: "c2", wantRetry: 1000,
		},
		{
			name:       "split inside a line and across the blank line",
			chunks:     []string{"id: c", "3\nevent: TASK_QU", "EUED\ndata: {\"event_i", "d\":\"q/3-0\"}\n", "\n"},
			wantEvents: []string{"q/3-0"}, wantCursor: "c3", wantRetry: 1000,
		},
		{
			name:       "CRLF and CR line ends",
			chunks:     []string{"id: c4\r\nevent: TASK_QUEUED\r\ndata: {\"event_id\":\"q/4-0\"}\r", "\n\r\n", "id: c5\revent: X\rdata: {\"event_id\":\"q/5-0\"}\r\r"},
			wantEvents: []string{"q/4-0", "q/5-0"}, wantCursor: "c5", wantRetry: 1000,
		},
		{
			name:       "keep-alive comments, and an id alone moves the cursor",
			chunks:     []string{": keep-alive\n\n", ": keep-alive\nid: c6\n\n"},
			wantCursor: "c6", wantRetry: 1000,
		},
		{
			name:       "data lines are joined with newlines",
			chunks:     []string{"id: c7\nevent: TASK_QUEUED\ndata: {\"event_id\":\ndata: \"q/7-0\"}\n\n"},
			wantEvents: []string{"q/7-0"}, wantCursor: "c7", wantRetry: 1000,
		},
		{
			name:       "reset moves to its fresh cursor",
			chunks:     []string{"id: fresh\nevent: reset\ndata: {\"cursor\":\"fresh\",\"queue\":\"q\",\"reason\":\"trimmed\"}\n\n"},
			wantEvents: []string{"reset:fresh"}, wantCursor: "fresh", wantRetry: 1000,
		},
		{
			name:       "an unfinished frame is not dispatched",
			chunks:     []string{"id: c8\nevent: TASK_QUEUED\ndata: {\"event_id\":\"q/8-0\"}\n"},
			wantCursor: "", wantRetry: 1000,
		},
	}
	for _, tt := range tests {
		chunks, err := json.Marshal(tt.chunks)
		require.NoError(t, err)
		got := run[struct {
			Events []string `json:"events"`
			Cursor string   `json:"cursor"`
			Retry  int      `json:"retry"`
		}](tb, `const {Feed} = await mod('feed.js');
			const f = new Feed();
			const events = [];
			f.on('event', e => events.push(e.event_id));
			f.on('reset', r => events.push('reset:' + r.cursor));
			const enc = new TextEncoder();
			const body = new ReadableStream({start(c) { for (const s of `+string(chunks)+`) c.enqueue(enc.encode(s)); c.close(); }});
			await f.read(body, new AbortController());
			return {events, cursor: f.cursor, retry: f.baseDelay};`)
		if tt.wantEvents == nil {
			tt.wantEvents = []string{}
		}
		require.Equal(t, tt.wantEvents, got.Events, tt.name)
		require.Equal(t, tt.wantCursor, got.Cursor, tt.name)
		require.Equal(t, tt.wantRetry, got.Retry, tt.name)
	}
}

// TestMemoryAndKeptText checks how the overview writes Redis's memory and
// how the queues page sums and describes a queue's kept tasks.
func TestMemoryAndKeptText(t *testing.T) {
	t.Parallel()
	tb := scriptTab(t)
	sizes := []struct {
		bytes int64
		want  string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1024, "1.0 KB"},
		{1536, "1.5 KB"},
		{29884416, "28.5 MB"},
		{150 * 1024 * 1024, "150 MB"},
		{1024*1024 - 20, "1.0 MB"}, // not "1024 KB"
		{1 << 30, "1.0 GB"},
	}
	for _, tt := range sizes {
		got := run[string](tb, fmt.Sprintf(`const {fmtBytes} = await mod('dom.js'); return fmtBytes(%d);`, tt.bytes))
		require.Equal(t, tt.want, got, "%d bytes", tt.bytes)
	}

	notes := []struct{ memory, want string }{
		{`{"used_bytes": 29884416, "max_bytes": 1073741824}`, "of 1.0 GB (3%)"},
		{`{"used_bytes": 1048576, "max_bytes": 1073741824}`, "of 1.0 GB (<1%)"},
		{`{"used_bytes": 966367641, "max_bytes": 1073741824}`, "of 1.0 GB (90%)"},
		{`{"used_bytes": 29884416, "max_bytes": 0}`, "no maxmemory set"},
	}
	for _, tt := range notes {
		got := run[string](tb, `const {memoryNote} = await mod('pages/overview.js'); return memoryNote(`+tt.memory+`);`)
		require.Equal(t, tt.want, got, tt.memory)
	}

	type kept struct {
		Total int    `json:"total"`
		Title string `json:"title"`
	}
	counts := []struct {
		retained string
		want     kept
	}{
		{`{}`, kept{0, "No finished tasks kept."}},
		{`undefined`, kept{0, "No finished tasks kept."}},
		{`{"expired": 1, "succeeded": 12, "dead_lettered": 2, "failed": 0}`,
			kept{15, "Finished tasks kept until their retention ends:\n12 succeeded\n2 dead lettered\n1 expired"}},
	}
	for _, tt := range counts {
		got := run[kept](tb, `const {keptCounts} = await mod('pages/queues.js'); return keptCounts(`+tt.retained+`);`)
		require.Equal(t, tt.want, got, tt.retained)
	}

	limits := []struct{ limits, want string }{
		{`null`, ""},
		{`{"rate": {"limit": 10, "period": "1s"}, "key_concurrency": 1}`, "10/1s · 1 per key"},
		{`{"fairness": {}}`, "fair"},
		{`{"fairness": {"default_weight": 2, "weights": {"zed": 1, "acme": 5}}, "key_rate": {"limit": 2, "period": "1s", "burst": 3}, "key_order": "fifo"}`,
			"fair (acme ×5, zed ×1, others ×2) · 2/1s per key (burst 3) · fifo per key"},
		{`{"concurrency": 2, "events": "outcomes"}`, "2 running · outcome events only"},
		{`{"events": "full"}`, ""},
	}
	for _, tt := range limits {
		got := run[string](tb, `const {describeLimits} = await mod('pages/queues.js'); return describeLimits(`+tt.limits+`);`)
		require.Equal(t, tt.want, got, tt.limits)
	}
	top := run[string](tb, `const {describeTopKeys} = await mod('pages/queues.js');
		return describeTopKeys([{key: "acme", queued: 1200}, {key: "", queued: 3}]);`)
	require.Equal(t, "acme 1,200, (no key) 3", top)
	for in, want := range map[string]string{`undefined`: "", `{}`: "", `{"replace": 3, "drop": 1200, "keep_last": 0}`: "drop 1,200, replace 3"} {
		got := run[string](tb, `const {describeDedup} = await mod('pages/queues.js'); return describeDedup(`+in+`);`)
		require.Equal(t, want, got, in)
	}
}

// TestKeyedRows renders lists into a table body and checks that rows
// follow the list's order, that a kept item keeps its element, and that
// an empty list shows the placeholder row.
func TestKeyedRows(t *testing.T) {
	t.Parallel()
	tb := scriptTab(t)
	type state struct {
		Keys    []string `json:"keys"`
		Made    int      `json:"made"`
		Reused  bool     `json:"reused"`
		Empty   string   `json:"empty"`
		Colspan string   `json:"colspan"`
	}
	got := run[[]state](tb, `const {keyedRows} = await mod('pages/common.js');
		const {h} = await mod('dom.js');
		const tbody = h('tbody', {});
		let made = 0;
		const table = keyedRows(tbody, {key: it => it.id, colspan: 3, empty: 'nothing here',
			make: it => { made++; return {tr: h('tr', {dataset: {id: it.id}})}; },
			fill: (row, it) => { row.tr.dataset.n = String(it.n); }});
		const look = () => ({
			keys: [...tbody.children].map(tr => tr.dataset.id ?? 'empty'), made,
			reused: false, empty: tbody.querySelector('tr.empty')?.textContent ?? '',
			colspan: tbody.querySelector('tr.empty td')?.getAttribute('colspan') ?? ''});
		const out = [];
		table.render([{id: 'a', n: 1}, {id: 'b', n: 1}]);
		const b = table.get('b').tr;
		out.push(look());
		table.render([{id: 'c', n: 2}, {id: 'b', n: 2}]);
		out.push({...look(), reused: table.get('b').tr === b && b.dataset.n === '2' && !table.get('a')});
		table.render([]);
		out.push(look());
		table.render([{id: 'b', n: 3}]);
		out.push(look());
		return out;`)
	require.Equal(t, []state{
		{Keys: []string{"a", "b"}, Made: 2},
		{Keys: []string{"c", "b"}, Made: 3, Reused: true},
		{Keys: []string{"empty"}, Made: 3, Empty: "nothing here", Colspan: "3"},
		{Keys: []string{"b"}, Made: 4},
	}, got)
}

// TestFilterParams reads a list page's filter from URL params and shows it
// in form controls.
func TestFilterParams(t *testing.T) {
	t.Parallel()
	tb := scriptTab(t)
	type result struct {
		Filter map[string]string `json:"filter"`
		Shown  []string          `json:"shown"`
	}
	got := run[result](tb, `const {readFilter, showFilter} = await mod('pages/common.js');
		const {h} = await mod('dom.js');
		const filter = readFilter(new URLSearchParams('queue=emails&other=x&error_class='), ['queue', 'type', 'error_class']);
		const queue = h('input', {}), type = h('input', {value: 'stale'});
		showFilter(filter, {queue, type});
		return {filter, shown: [queue.value, type.value]};`)
	require.Equal(t, result{
		Filter: map[string]string{"queue": "emails", "type": "", "error_class": ""},
		Shown:  []string{"emails", ""},
	}, got)
}

// TestConfirmAnswersEachQuestion asks a second question before the first
// one's close event has arrived: each gets its own answer, so a cancelled
// question is never taken as confirmed by the next one's OK.
func TestConfirmAnswersEachQuestion(t *testing.T) {
	t.Parallel()
	tb := scriptTab(t)
	tests := []struct {
		name          string
		first, second string
		want          []bool
	}{
		{"cancel then confirm", "cancel", "ok", []bool{false, true}},
		{"confirm then cancel", "ok", "cancel", []bool{true, false}},
		{"escape then confirm", "", "ok", []bool{false, true}},
	}
	for _, tt := range tests {
		got := run[[]bool](tb, fmt.Sprintf(`const {confirmAction} = await mod('ui.js');
			const dlg = document.getElementById('confirm');
			const first = confirmAction({title: 'First?', body: 'one'});
			dlg.close(%q);
			const second = confirmAction({title: 'Second?', body: 'two'});
			dlg.close(%q);
			return [await first, await second];`, tt.first, tt.second))
		require.Equal(t, tt.want, got, tt.name)
	}
}
