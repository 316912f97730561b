package events

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// StatusCursorExpired is the WebSocket close code sent when the client's
// cursor is older than the retained events (HTTP 410 Gone, in the
// application range).
const StatusCursorExpired websocket.StatusCode = 4410

// ServeWS serves GET /ws/events as a WebSocket. Each event is a JSON text
// message {"cursor": "<cursor after it>", "event": <envelope>}. A cursor
// older than the retained events gets a last message {"cursor": <fresh
// cursor>, "reset": {"queue", "reason"}} and the close code 4410. The query
// is ServeSSE's (Last-Event-ID is accepted too); a bad query is answered
// with Config.WriteError (400) before the upgrade. The server pings an idle
// connection every KeepAlive; a data message from the client closes the
// connection (1008), as the feed is one-way.
func (h *Hub) ServeWS(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscribeRequest(w, r)
	if !ok {
		return
	}
	defer sub.Close()

	hw := &handshakeWriter{ResponseWriter: w}
	c, err := websocket.Accept(hw, r, &websocket.AcceptOptions{OriginPatterns: h.cfg.OriginPatterns})
	if err != nil {
		hw.refuse(h, r)
		return
	}
	defer c.CloseNow()
	// CloseRead answers pings and the close handshake; its context ends
	// when the client goes away.
	ctx := c.CloseRead(r.Context())
	for {
		kctx, cancel := context.WithTimeout(ctx, h.cfg.KeepAlive)
		ev, err := sub.Next(kctx)
		cancel()
		var re *ResetError
		switch {
		case err == nil:
			msg := make([]byte, 0, len(ev.Data)+len(ev.Cursor)+24)
			msg = append(msg, `{"cursor":"`...)
			msg = append(msg, ev.Cursor...) // base64url: nothing to escape
			msg = append(msg, `","event":`...)
			msg = append(msg, ev.Data...)
			msg = append(msg, '}')
			err = h.wsWrite(ctx, c, msg)
		case errors.As(err, &re):
			msg := mustJSON(map[string]any{"cursor": re.Cursor,
				"reset": map[string]string{"queue": re.Queue, "reason": resetReason}})
			if h.wsWrite(ctx, c, msg) == nil {
				_ = c.Close(StatusCursorExpired, "cursor expired: events after it were trimmed")
			}
			return
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			pctx, cancel := context.WithTimeout(ctx, h.cfg.WriteTimeout)
			err = c.Ping(pctx)
			cancel()
		case errors.Is(err, ErrHubClosed):
			_ = c.Close(websocket.StatusGoingAway, "server shutting down")
			return
		default:
			return // the client went away
		}
		if err != nil {
			return
		}
	}
}

func (h *Hub) wsWrite(ctx context.Context, c *websocket.Conn, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.WriteTimeout)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, msg)
}

// handshakeWriter holds back the plain-text refusal websocket.Accept writes
// for a request that is not a valid handshake (426, 400, 403), so that the
// client gets the API's error envelope instead (refuse). Everything else,
// the 101 and the hijack included, goes through.
type handshakeWriter struct {
	http.ResponseWriter
	status int
	msg    bytes.Buffer
}

func (w *handshakeWriter) WriteHeader(code int) {
	if code >= 400 && w.status == 0 {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *handshakeWriter) Write(b []byte) (int, error) {
	if w.status != 0 {
		return w.msg.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets websocket.Accept hijack the connection underneath.
func (w *handshakeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// refuse answers the refusal Accept held back, if any, with
// Config.WriteError. The headers Accept set for it stay (Upgrade on 426,
// Sec-WebSocket-Version on 400).
func (w *handshakeWriter) refuse(h *Hub, r *http.Request) {
	if w.status == 0 {
		return
	}
	code := codeInvalidRequest
	switch {
	case w.status == http.StatusForbidden:
		code = codeForbidden
	case w.status >= 500:
		code = codeInternal
	}
	msg := "this endpoint takes WebSocket handshakes only: " + strings.TrimSpace(w.msg.String())
	h.cfg.WriteError(w.ResponseWriter, r, w.status, code, msg, map[string]any{})
}
