package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxRequestIDLen bounds a client-supplied X-Request-ID.
const maxRequestIDLen = 128

// reqState is what the middleware learns about a request while it runs.
type reqState struct {
	id       string
	keyName  string      // set by authorize once a key is accepted
	budget   *bodyBudget // the server's; nil = bodies are not counted
	reserved int64       // bytes of budget this request's body holds
}

type stateCtxKey struct{}

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateCtxKey{}).(*reqState)
	return st
}

// RequestIDFromContext returns the request's id (the X-Request-ID it was
// answered with), or "" outside a request served by Server.
func RequestIDFromContext(ctx context.Context) string {
	if st := stateFrom(ctx); st != nil {
		return st.id
	}
	return ""
}

// serve is the middleware every request passes: it settles the request id,
// recovers panics into 500 INTERNAL_ERROR and logs one line at the end.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := &reqState{id: requestID(r.Header.Values("X-Request-ID")), budget: s.bodies}
	w.Header().Set("X-Request-ID", st.id)
	sw := &statusWriter{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), stateCtxKey{}, st))

	defer func(ctx context.Context) {
		p := recover()
		st.budget.release(st.reserved)
		if p != nil && !errors.Is(asError(p), http.ErrAbortHandler) {
			s.log.ErrorContext(ctx, "panic serving request", "request_id", st.id,
				"method", clean(r.Method), "path", clean(r.URL.Path),
				"panic", clean(fmt.Sprint(p)), "stack", string(debug.Stack()))
			if sw.status == 0 {
				s.writeAPIError(sw, r, internalError())
			}
		}
		s.logRequest(r, sw.statusCode(), time.Since(start), st)
		if p != nil && errors.Is(asError(p), http.ErrAbortHandler) {
			panic(p) // the server aborts the response quietly
		}
	}(r.Context())
	s.dispatch(sw, r)
}

func (s *Server) logRequest(r *http.Request, status int, d time.Duration, st *reqState) {
	level := requestLevel(r, status)
	if !s.access.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", clean(r.Method)),
		slog.String("path", clean(r.URL.Path)),
		slog.Int("status", status),
		slog.Duration("duration", d),
		slog.String("request_id", st.id),
	}
	if st.keyName != "" {
		attrs = append(attrs, slog.String("key", clean(st.keyName)))
	}
	s.access.LogAttrs(r.Context(), level, "http request", attrs...)
}

// ClientHeader is the request header the dashboard sets on its reads
// (Dtq-Client: dashboard), so that its polling is logged at DEBUG.
const ClientHeader = "Dtq-Client"

// requestLevel is the level of a request's log line: DEBUG when the client
// left first (thousands of long-polls closing are no warning); WARN for a
// 5xx; DEBUG for what polls (probes, /metrics, and the dashboard's own successful
// reads), which would otherwise bury the requests worth reading; else INFO.
func requestLevel(r *http.Request, status int) slog.Level {
	switch {
	case r.Context().Err() != nil:
		return slog.LevelDebug // the client left before the answer: nothing to act on
	case status >= 500:
		return slog.LevelWarn
	case status >= 400:
		return slog.LevelInfo
	case r.URL.Path == "/health" || r.URL.Path == "/ready" || r.URL.Path == "/metrics":
		return slog.LevelDebug
	case r.Method == http.MethodGet && r.Header.Get(ClientHeader) == "dashboard":
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// requestID returns the client's X-Request-ID when it is sane (one value,
// 1..128 printable ASCII characters), else a new random id.
func requestID(values []string) string {
	if len(values) == 1 && saneRequestID(values[0]) {
		return values[0]
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := range len(id) {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// maxLogField bounds one logged string, so a long path cannot flood a log.
const maxLogField = 512

// clean makes s safe for one log line: control characters and invalid UTF-8
// are dropped and the length is bounded.
func clean(s string) string {
	ok := len(s) <= maxLogField
	for _, c := range s {
		if c == utf8.RuneError || unicode.IsControl(c) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		if c == utf8.RuneError || unicode.IsControl(c) {
			continue
		}
		if b.Len()+utf8.RuneLen(c) > maxLogField {
			b.WriteString("…")
			break
		}
		b.WriteRune(c)
	}
	return b.String()
}

// statusWriter remembers the status code written, for the log line and so
// that panic recovery knows whether an answer has started.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) statusCode() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// asError is a recovered panic value as an error (nil when it is none).
func asError(p any) error {
	err, _ := p.(error)
	return err
}
