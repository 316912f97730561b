package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// duration is a JSON duration: a Go duration string ("30s", "1m") or a
// number of seconds.
type duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *duration) UnmarshalJSON(b []byte) error {
	bad := errors.New("must be a duration like \"30s\" or a number of seconds")
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return bad
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil {
				return bad
			}
			return d.seconds(f, bad)
		}
		*d = duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return bad
	}
	return d.seconds(f, bad)
}

func (d *duration) seconds(f float64, bad error) error {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e9 {
		return bad
	}
	*d = duration(f * float64(time.Second))
	return nil
}

// decodeWorkerBody decodes the required JSON body of a worker route,
// answering a bad duration with its field.
func (s *Server) decodeWorkerBody(w http.ResponseWriter, r *http.Request, dst any, example string, limit int64) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	got, err := decodeBody(w, r, dst, example, limit)
	var re *requestError
	if errors.As(err, &re) && re.field == "" {
		// A bad duration surfaces as the generic message: name the fields.
		re.message += "; durations are strings like \"30s\" or numbers of seconds"
	}
	if err != nil {
		return err
	}
	if !got {
		return badRequest("", "the body must be a JSON object like %s", example)
	}
	return nil
}

// claimBody is POST /api/v1/claims's body.
type claimBody struct {
	WorkerID string   `json:"worker_id"`
	Queues   []string `json:"queues"`
	Max      int      `json:"max"`
	Wait     duration `json:"wait"`
	Lease    duration `json:"lease"`
}

// claimAnswer is POST /api/v1/claims's answer.
type claimAnswer struct {
	Tasks []*dtq.LeasedTask `json:"tasks"`
}

// claim is POST /api/v1/claims: up to max tasks of the queues, each under
// its own lease, waiting up to wait (≤ 30s) for a first one.
func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	var b claimBody
	if err := s.decodeWorkerBody(w, r, &b, `{"worker_id": "py-1", "queues": ["default"], "max": 10, "wait": "10s", "lease": "30s"}`, maxActionBody); err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, q := range b.Queues {
		if err := requireScope(r, q); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	// A claim that waits holds a Redis connection while it blocks: it
	// counts against the process's long-poll bound (not the key's).
	if b.Wait > 0 {
		if scope, limit := s.waits.acquire(""); scope != "" {
			s.writeAPIError(w, r, tooManyWaits(scope, limit))
			return
		}
		defer s.waits.release("")
	}
	// The key's name bounds the worker ids it registers; open mode has none.
	key, _ := KeyFromContext(r.Context())
	tasks, err := s.cfg.WorkerGateway.Claim(r.Context(), dtq.ClaimRequest{WorkerID: b.WorkerID, Queues: b.Queues, Max: b.Max,
		Wait: time.Duration(b.Wait), Lease: time.Duration(b.Lease), Key: key.Name})
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	if tasks == nil {
		tasks = []*dtq.LeasedTask{}
	}
	s.writeJSON(w, r, http.StatusOK, claimAnswer{Tasks: tasks})
}

// heartbeatBody is POST /api/v1/tasks/{id}/heartbeat's body.
type heartbeatBody struct {
	LeaseToken string   `json:"lease_token"`
	Lease      duration `json:"lease"`
	// The progress report a heartbeat may carry (see progress).
	Progress json.RawMessage `json:"progress"`
	Logs     logLines        `json:"logs"`
	Seq      int64           `json:"seq"`
}

// heartbeatAnswer is a heartbeat's answer; progress_written says, for a
// heartbeat that carried a report, whether it was written (false: within
// a second of the last write; send it again later).
type heartbeatAnswer struct {
	*dtq.Renewal
	ProgressWritten *bool `json:"progress_written,omitempty"`
}

// heartbeat is POST /api/v1/tasks/{id}/heartbeat: renews the lease and
// tells whether a cancel was requested.
func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	var b heartbeatBody
	if err := s.decodeWorkerBody(w, r, &b, `{"lease_token": "…", "lease": "30s"}`, maxProgressBody); err != nil {
		s.writeError(w, r, err)
		return
	}
	p := progressBody{LeaseToken: b.LeaseToken, Progress: b.Progress, Logs: b.Logs, Seq: b.Seq}
	var rep dtq.ProgressReport
	if !p.empty() {
		// A bad report is refused before the lease is renewed.
		var err error
		if rep, err = p.report(); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := rep.Validate(); err != nil {
			s.writeError(w, r, queryError(err))
			return
		}
	}
	id := r.PathValue("id")
	ren, err := s.cfg.WorkerGateway.Heartbeat(r.Context(), id, b.LeaseToken, time.Duration(b.Lease))
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	ans := heartbeatAnswer{Renewal: ren}
	if !p.empty() {
		err := s.cfg.WorkerGateway.Progress(r.Context(), id, b.LeaseToken, rep)
		var ts *dtq.ProgressTooSoonError
		if err != nil && !errors.As(err, &ts) {
			s.writeError(w, r, queryError(err))
			return
		}
		written := err == nil
		ans.ProgressWritten = &written
	}
	s.writeJSON(w, r, http.StatusOK, ans)
}

// completeBody is POST /api/v1/tasks/{id}/complete's body.
type completeBody struct {
	LeaseToken string          `json:"lease_token"`
	Result     json.RawMessage `json:"result"`
}

// complete is POST /api/v1/tasks/{id}/complete: the attempt succeeded.
func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	var b completeBody
	if err := s.decodeWorkerBody(w, r, &b, `{"lease_token": "…", "result": {"ok": true}}`, s.maxBody); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := s.cfg.WorkerGateway.Complete(r.Context(), id, b.LeaseToken, b.Result); err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.finishedTask(w, r, id, dtqtype.StatusSucceeded)
}

// failBody is POST /api/v1/tasks/{id}/fail's body.
type failBody struct {
	LeaseToken string `json:"lease_token"`
	Error      struct {
		Class   string `json:"class"`
		Message string `json:"message"`
	} `json:"error"`
	Retryable  *bool    `json:"retryable"`
	RetryAfter duration `json:"retry_after"`
}

// fail is POST /api/v1/tasks/{id}/fail: the attempt failed; the task is
// retrying, dead-lettered, failed or (after a cancel request) cancelled.
func (s *Server) fail(w http.ResponseWriter, r *http.Request) {
	var b failBody
	if err := s.decodeWorkerBody(w, r, &b, `{"lease_token": "…", "error": {"class": "Timeout", "message": "…"}, "retryable": true, "retry_after": "5s"}`, maxActionBody); err != nil {
		s.writeError(w, r, err)
		return
	}
	f := dtq.Failure{Class: b.Error.Class, Message: b.Error.Message, Retryable: b.Retryable == nil || *b.Retryable,
		RetryAfter: time.Duration(b.RetryAfter)}
	id := r.PathValue("id")
	if err := s.cfg.WorkerGateway.Fail(r.Context(), id, b.LeaseToken, f); err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.finishedTask(w, r, id, "")
}

// finishedTask answers a finalize with the task. A task already gone
// (retention 0) answers its id and the status it reached, when known
// (status ""; a failure's outcome is not: retried tasks are kept).
func (s *Server) finishedTask(w http.ResponseWriter, r *http.Request, id string, status dtqtype.Status) {
	t, err := s.cfg.Inspector.GetTask(r.Context(), id)
	if errors.Is(err, dtq.ErrTaskNotFound) {
		gone := map[string]any{"task_id": id}
		if status != "" {
			gone["status"] = status
		}
		s.writeJSON(w, r, http.StatusOK, gone)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, t)
}
