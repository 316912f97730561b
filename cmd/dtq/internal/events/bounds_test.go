package events

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// forgedCursor names n queues that were never created, plus extra ones.
func forgedCursor(t *testing.T, n int, extra ...string) string {
	t.Helper()
	c := NewCursor(time.Now().Add(-time.Minute))
	id, err := parseStreamID(fmt.Sprintf("%d-0", time.Now().UnixMilli()))
	require.NoError(t, err)
	for i := range n {
		c.set(fmt.Sprintf("fake-%05d", i), id)
	}
	for _, q := range extra {
		c.set(q, id)
	}
	return c.String()
}

func TestOversizedCursorIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	huge := forgedCursor(t, 20000)
	require.Greater(t, len(huge), 700<<10, "the cursor of the report: about 720 KB")
	for _, tc := range []struct{ query, lastEventID, field string }{
		{"", huge, "Last-Event-ID"},
		{"?cursor=" + huge[:MaxCursorLen+1], "", "cursor"},
	} {
		_, resp := b.tryOpenSSE(t, tc.query, tc.lastEventID)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, "INVALID_REQUEST", body["code"])
		require.Equal(t, tc.field, body["details"].(map[string]any)["field"])
		require.Contains(t, body["message"], "4096 bytes")
	}
}

// TestCursorKeepsKnownQueuesOnly: a cursor under the size bound that names
// queues the registry does not hold loses those positions, so they are not
// echoed in every frame.
func TestCursorKeepsKnownQueuesOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.register(t, "real")
	b.waitReaders(t, "real")
	b.register(t, "late") // in the registry, maybe not read yet: kept either way
	cur := forgedCursor(t, 40, "real", "late")
	require.LessOrEqual(t, len(cur), MaxCursorLen)

	c := b.openSSE(t, "", cur)
	got, err := ParseCursor(c.start(t))
	require.NoError(t, err)
	queues := make([]string, 0, len(got.pos))
	for q := range got.pos {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	require.Equal(t, []string{"late", "real"}, queues)
}

func TestSubscriberLimit(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxSubscribers = 2
	b := setup(t, cfg)
	first := b.openSSE(t, "", "")
	first.start(t)
	second := b.openSSE(t, "", "")
	second.start(t)

	_, resp := b.tryOpenSSE(t, "", "")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"code":"TOO_MANY_SUBSCRIBERS"`)
	wsResp, err := b.srv.Client().Get(b.srv.URL + "/ws/events")
	require.NoError(t, err)
	wsResp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, wsResp.StatusCode, "the WebSocket shares the bound")

	open, refused := b.hub.SubscriberCounts()
	require.Equal(t, 2, open)
	require.EqualValues(t, 2, refused)

	first.close()
	require.Eventually(t, func() bool { n, _ := b.hub.SubscriberCounts(); return n == 1 }, 10*time.Second, 10*time.Millisecond)
	b.openSSE(t, "", "").start(t)
}
