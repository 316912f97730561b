package events

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

type wsConn struct {
	c      *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *bundle) dialWS(t *testing.T, query string) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	u := "ws" + strings.TrimPrefix(b.srv.URL, "http") + "/ws/events" + query
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: b.srv.Client()})
	require.NoError(t, err)
	w := &wsConn{c: c, ctx: ctx, cancel: cancel}
	t.Cleanup(w.close)
	return w
}

func (w *wsConn) close() {
	_ = w.c.CloseNow()
	w.cancel()
}

func (w *wsConn) read(t *testing.T) map[string]any {
	t.Helper()
	typ, data, err := w.c.Read(w.ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

// closeStatus reads until the server closes and returns its close code.
func (w *wsConn) closeStatus(t *testing.T) websocket.StatusCode {
	t.Helper()
	for {
		_, _, err := w.c.Read(w.ctx)
		if err != nil {
			var ce websocket.CloseError
			require.True(t, errors.As(err, &ce), "closed by the server: %v", err)
			return ce.Code
		}
	}
}

func TestWebSocket(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.register(t, "q")
	b.waitReaders(t, "q")
	ws := b.dialWS(t, "?queue=q")
	ids := b.add(t, "q", taskEvent(TypeTaskQueued), taskEvent(TypeTaskStarted))

	m := ws.read(t)
	event := m["event"].(map[string]any)
	require.Equal(t, "q/"+ids[0], event["event_id"])
	require.Equal(t, TypeTaskQueued, event["type"])
	cursor := m["cursor"].(string)
	cur, err := ParseCursor(cursor)
	require.NoError(t, err)
	require.Equal(t, ids[0], cur.position("q").String())
	ws.close()

	// Resuming from the cursor delivers the next event, once.
	ws = b.dialWS(t, "?queue=q&cursor="+cursor)
	m = ws.read(t)
	require.Equal(t, "q/"+ids[1], m["event"].(map[string]any)["event_id"])
	more := b.add(t, "q", taskEvent(TypeTaskSucceeded))
	m = ws.read(t)
	require.Equal(t, "q/"+more[0], m["event"].(map[string]any)["event_id"])
}

// A request that is not a valid handshake gets the error envelope, not
// the WebSocket library's plain text.
func TestWebSocketRefusedHandshake(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tests := []struct {
		name   string
		header map[string]string
		status int
		code   string
		hdr    string // a header the refusal keeps
	}{
		{"plain GET", nil, http.StatusUpgradeRequired, codeInvalidRequest, "Upgrade"},
		{"old version", map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "8",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, http.StatusBadRequest, codeInvalidRequest, "Sec-WebSocket-Version"},
		{"foreign origin", map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Origin": "https://evil.example"}, http.StatusForbidden, codeForbidden, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/ws/events", nil)
			require.NoError(t, err)
			req.Header.Set("X-Request-ID", "hs-1")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			res, err := b.srv.Client().Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			require.Equal(t, tt.status, res.StatusCode)
			require.Equal(t, "application/json", res.Header.Get("Content-Type"))
			if tt.hdr != "" {
				require.NotEmpty(t, res.Header.Get(tt.hdr))
			}
			var e struct {
				Code      string         `json:"code"`
				Message   string         `json:"message"`
				Details   map[string]any `json:"details"`
				RequestID string         `json:"request_id"`
			}
			require.NoError(t, json.NewDecoder(res.Body).Decode(&e))
			require.Equal(t, tt.code, e.Code)
			require.Equal(t, "hs-1", e.RequestID)
			require.NotNil(t, e.Details)
			require.Contains(t, e.Message, "WebSocket")
		})
	}
}
