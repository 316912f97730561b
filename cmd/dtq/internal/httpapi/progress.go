package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"

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

// logLines are a report's lines. A null line is refused (decoded into a
// string it would be stored as an empty line the worker never logged).
type logLines []string

// UnmarshalJSON reads an array of strings; a null element is a type error,
// which the body decoder answers 400 naming the field.
func (l *logLines) UnmarshalJSON(b []byte) error {
	var lines []*string
	if err := json.Unmarshal(b, &lines); err != nil {
		return err
	}
	if lines == nil {
		*l = nil
		return nil
	}
	out := make(logLines, len(lines))
	for i, s := range lines {
		if s == nil {
			return &json.UnmarshalTypeError{Value: "null", Type: reflect.TypeFor[string]()}
		}
		out[i] = *s
	}
	*l = out
	return nil
}

func (b *progressBody) report() dtq.ProgressReport {
	return dtq.ProgressReport{Progress: b.Progress, Logs: []string(b.Logs), Seq: b.Seq}
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
	err := s.cfg.WorkerGateway.Progress(r.Context(), r.PathValue("id"), b.LeaseToken, b.report())
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
