package events

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// sseRetryMS is the reconnect delay suggested to EventSource clients.
const sseRetryMS = "2000"

// mustJSON encodes v, which holds only strings, numbers and maps of them
// and so cannot fail to encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("events: encoding " + err.Error())
	}
	return b
}

// resetReason is what a client is told when its cursor was trimmed away.
const resetReason = "events after the cursor were trimmed from the event stream; reload state and continue from the new cursor"

// ServeSSE serves GET /api/v1/events as Server-Sent Events. Each event is
// "id: <cursor after it>", "event: <type>" and "data: <envelope JSON>"; a
// cursor older than the retained events gets an "event: reset" whose data
// is {"cursor", "queue", "reason"}, after which the stream goes on from
// that fresh cursor. The query takes queue, task_id and type (comma lists)
// and cursor; the Last-Event-ID header wins over ?cursor=. An idle stream
// gets a keep-alive comment every KeepAlive (with an id line when filtered
// events moved the cursor). The stream ends when the client goes away or
// the hub stops. A bad query is answered with Config.WriteError (400).
func (h *Hub) ServeSSE(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscribeRequest(w, r)
	if !ok {
		return
	}
	defer sub.Close()

	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // no proxy buffering
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: rc, timeout: h.cfg.WriteTimeout}

	// The first frame carries the starting position, so that a client that
	// reconnects before any event resumes from here, not from "now".
	sent := sub.Cursor()
	if sw.write("retry: "+sseRetryMS+"\nid: "+sent+"\n\n") != nil {
		return
	}
	ctx := r.Context()
	for {
		kctx, cancel := context.WithTimeout(ctx, h.cfg.KeepAlive)
		ev, err := sub.Next(kctx)
		cancel()
		var re *ResetError
		switch {
		case err == nil:
			err = sw.event(ev.Cursor, ev.Type, ev.Data)
			sent = ev.Cursor
		case errors.As(err, &re):
			data := mustJSON(map[string]string{"cursor": re.Cursor, "queue": re.Queue, "reason": resetReason})
			err = sw.event(re.Cursor, "reset", data)
			sent = re.Cursor
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			frame := ": keep-alive\n\n"
			if cur := sub.Cursor(); cur != sent {
				// An id without data moves the client's Last-Event-ID
				// without dispatching an event.
				frame = ": keep-alive\nid: " + cur + "\n\n"
				sent = cur
			}
			err = sw.write(frame)
		default:
			return // the client went away, or the hub stopped
		}
		if err != nil {
			return
		}
	}
}

// sseWriter writes frames, each flushed at once and bounded by a deadline
// so that a client that stopped reading cannot hold the handler forever.
type sseWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
	buf     strings.Builder
}

func (s *sseWriter) event(id, typ string, data []byte) error {
	s.buf.Reset()
	s.buf.WriteString("id: ")
	s.buf.WriteString(id)
	s.buf.WriteString("\nevent: ")
	s.buf.WriteString(typ)
	s.buf.WriteString("\ndata: ")
	s.buf.Write(data) // compact JSON: no newlines
	s.buf.WriteString("\n\n")
	return s.write(s.buf.String())
}

func (s *sseWriter) write(frame string) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) // unsupported by some writers: best effort
	if _, err := io.WriteString(s.w, frame); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
