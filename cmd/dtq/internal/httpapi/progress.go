package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-io/dtq"
)

// progressBody is POST /api/v1/tasks/{id}/progress's body; a heartbeat
// may carry the same progress, logs and seq.
type progressBody struct {
	LeaseToken string          `json:"lease_token"`
	Progress   json.RawMessage `json:"progress"`
	Logs       logLines        `json:"logs"`
	Seq        int64           `json:"seq"`
}

// logLines are a report's lines: each a plain string (timed by the
// server when it writes it) or {"ts", "line"} with the time the worker
// logged it. A null line is refused (decoded into a string it would be
// stored as an empty line the worker never logged).
type logLines []logLine

// logLine is one reported line. ts is the raw ts of an object entry
// (timed), parsed by report so that a bad one is named by its index;
// field and problem describe an object entry not of the form {"ts", "line"}.
type logLine struct {
	ts, line       string
	timed          bool
	field, problem string
}

// logLineObject is a line sent as an object.
type logLineObject struct {
	TS   json.RawMessage `json:"ts"`
	Line *string         `json:"line"`
}

// lineExample shows a timed line in error messages.
const lineExample = `{"ts": "2026-01-02T15:04:05.123Z", "line": "copied 4 of 10 files"}`

// UnmarshalJSON reads an array whose elements are strings or {"ts",
// "line"} objects; a null or any other element is a type error, which the
// body decoder answers 400 naming the field. A malformed object is named
// by its index when report runs.
func (l *logLines) UnmarshalJSON(b []byte) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return err
	}
	if raws == nil {
		*l = nil
		return nil
	}
	out := make(logLines, len(raws))
	for i, raw := range raws {
		switch {
		case len(raw) > 0 && raw[0] == '"':
			if err := json.Unmarshal(raw, &out[i].line); err != nil {
				return err
			}
		case len(raw) > 0 && raw[0] == '{':
			out[i] = objectLine(raw, i)
		default:
			return &json.UnmarshalTypeError{Value: "null", Type: reflect.TypeFor[string]()}
		}
	}
	*l = out
	return nil
}

// objectLine reads the i-th line sent as an object.
func objectLine(raw json.RawMessage, i int) logLine {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var o logLineObject
	var ts string
	switch err := dec.Decode(&o); {
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		f, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return logLine{field: fmt.Sprintf("logs[%d].%s", i, f), problem: "is not a member of a line; a line looks like " + lineExample}
	case err != nil || o.Line == nil:
		return logLine{field: fmt.Sprintf("logs[%d].line", i), problem: "must be a string; a line looks like " + lineExample}
	case len(o.TS) == 0 || string(o.TS) == "null":
		return logLine{field: fmt.Sprintf("logs[%d].ts", i), problem: "is required in a line sent as an object " +
			"(a line sent as a plain string is timed by the server); a line looks like " + lineExample}
	case json.Unmarshal(o.TS, &ts) != nil:
		return logLine{field: fmt.Sprintf("logs[%d].ts", i), problem: "must be an RFC 3339 time string such as \"2026-01-02T15:04:05.123Z\""}
	}
	return logLine{ts: ts, line: *o.Line, timed: true}
}

// report is the body as the gateway takes it; a malformed line or a ts
// that is not an RFC 3339 time is 400 naming it (logs[i].ts).
func (b *progressBody) report() (dtq.ProgressReport, error) {
	p := dtq.ProgressReport{Progress: b.Progress, Seq: b.Seq}
	if b.Logs != nil {
		p.Logs = make([]dtq.ReportedLine, len(b.Logs))
	}
	for i, l := range b.Logs {
		p.Logs[i].Line = l.line
		if l.problem != "" {
			return p, badRequest(l.field, "%s: %s", l.field, l.problem)
		}
		if !l.timed {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, l.ts)
		if err != nil {
			f := fmt.Sprintf("logs[%d].ts", i)
			return p, badRequest(f, "%s: %q is not an RFC 3339 time such as \"2026-01-02T15:04:05.123Z\"", f, trimForMessage(l.ts))
		}
		p.Logs[i].TS = ts.Truncate(time.Millisecond)
	}
	return p, nil
}

// trimForMessage cuts a value quoted in an error message.
func trimForMessage(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func (b *progressBody) empty() bool {
	return (len(b.Progress) == 0 || string(b.Progress) == "null") && len(b.Logs) == 0
}

// maxProgressBody bounds a progress report: a progress object and a full
// batch of lines at their largest, with room for JSON escaping.
const maxProgressBody = 2*dtq.MaxProgressBytes + 2*dtq.DefaultTaskLogLines*dtq.MaxLogLineBytes

// progressAnswer is the progress endpoint's answer.
type progressAnswer struct {
	Written bool `json:"written"`
}

// progress is POST /api/v1/tasks/{id}/progress: the attempt's progress and
// log lines, fenced by the lease token; at most one write per task per
// second (a faster one is 429 PROGRESS_TOO_SOON with Retry-After).
func (s *Server) progress(w http.ResponseWriter, r *http.Request) {
	var b progressBody
	if err := s.decodeWorkerBody(w, r, &b, `{"lease_token": "…", "progress": 40, "logs": ["copied 4 of 10 files"], "seq": 7}`, maxProgressBody); err != nil {
		s.writeError(w, r, err)
		return
	}
	rep, err := b.report()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	err = s.cfg.WorkerGateway.Progress(r.Context(), r.PathValue("id"), b.LeaseToken, rep)
	var ts *dtq.ProgressTooSoonError
	switch {
	case errors.As(err, &ts):
		s.writeAPIError(w, r, progressTooSoon(ts))
		return
	case err != nil:
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, progressAnswer{Written: !b.empty()})
}

// progressTooSoon is the answer to a report within a second of the
// attempt's last write: 429 with Retry-After.
func progressTooSoon(ts *dtq.ProgressTooSoonError) *apiError {
	return &apiError{status: http.StatusTooManyRequests, code: codeProgressTooSoon,
		message: "this attempt's progress was written less than a second ago (one write per task per second); " +
			"nothing was written: send the report again after Retry-After, merged with what came since",
		details:    map[string]any{"retry_after_ms": ts.RetryAfter.Milliseconds()},
		retryAfter: 1}
}

// taskLogs is GET /api/v1/tasks/{id}/logs?attempt=&cursor=&limit=: the
// task's log lines, oldest first.
func (s *Server) taskLogs(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "attempt", "cursor", "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p := dtq.TaskLogsParams{Cursor: q.Get("cursor")}
	if q.Has("attempt") {
		n, err := strconv.Atoi(q.Get("attempt"))
		if err != nil || n < 1 {
			s.writeError(w, r, badRequest("attempt", "attempt: must be a positive integer (or absent: every attempt)"))
			return
		}
		p.Attempt = n
	}
	if p.Limit, err = parseLimit(q); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.cfg.Inspector.TaskLogs(r.Context(), r.PathValue("id"), p)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, page)
}
