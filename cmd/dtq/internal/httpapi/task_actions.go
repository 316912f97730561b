package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// maxReasonLen bounds a cancel reason, in characters.
const maxReasonLen = 200

// taskBody is an action's answer about one task.
type taskBody struct {
	Task *dtqtype.TaskInfo `json:"task"`
}

// cancelBody is POST /api/v1/tasks/{id}/cancel's answer.
type cancelBody struct {
	Task            *dtqtype.TaskInfo `json:"task"`
	CancelRequested bool              `json:"cancel_requested"`
}

// cancelTask is POST /api/v1/tasks/{id}/cancel with an optional body
// {"reason": "..."}. A pending, queued or retrying task is cancelled at once;
// a running one gets a cancel request its worker acts on. Cancelling a
// cancelled task again is 202 too.
func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var in struct {
		Reason string `json:"reason"`
	}
	if _, err := decodeActionBody(w, r, &in, `{"reason": "ordered twice"}`); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkReason(in.Reason); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	res, err := s.cfg.Admin.CancelTask(ctx, id, in.Reason)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	detail := in.Reason
	if res.Requested {
		detail = strings.TrimSuffix("requested (the task is running); "+detail, "; ")
	}
	s.audited(r, "task.cancel", id, detail)
	s.writeJSON(w, r, http.StatusAccepted, cancelBody{Task: res.Task, CancelRequested: res.Requested})
}

// checkReason accepts a cancel reason of at most maxReasonLen characters on
// one line: it ends up in events and the audit log.
func checkReason(reason string) error {
	if utf8.RuneCountInString(reason) > maxReasonLen {
		return badRequest("reason", "reason: must be at most %d characters", maxReasonLen)
	}
	for _, c := range reason {
		if unicode.IsControl(c) || c == utf8.RuneError {
			return badRequest("reason", "reason: must be one line of text without control characters")
		}
	}
	return nil
}

// runNow is POST /api/v1/tasks/{id}/run-now: a pending or retrying task
// becomes due now.
func (s *Server) runNow(w http.ResponseWriter, r *http.Request) {
	if err := actionInput(w, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	t, err := s.cfg.Admin.RunNow(ctx, id)
	if err != nil {
		s.writeStateError(w, r, err, "only a pending or retrying task can be made due now")
		return
	}
	s.audited(r, "task.run_now", id, "")
	s.writeJSON(w, r, http.StatusOK, taskBody{Task: t})
}

// deleteTask is DELETE /api/v1/tasks/{id}: a finished task is removed with
// its result.
func (s *Server) deleteTask(w http.ResponseWriter, r *http.Request) {
	if err := actionInput(w, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	if err := s.cfg.Admin.DeleteTask(ctx, id); err != nil {
		s.writeStateError(w, r, err, "only a finished task can be deleted; cancel it first")
		return
	}
	s.audited(r, "task.delete", id, "")
	w.WriteHeader(http.StatusNoContent)
}

// writeStateError answers err; a TASK_CONFLICT answer gets a message
// saying what the action needs.
func (s *Server) writeStateError(w http.ResponseWriter, r *http.Request, err error, hint string) {
	var se *dtq.TaskStateError
	if errors.As(err, &se) && errors.Is(err, dtq.ErrTaskConflict) {
		s.writeAPIError(w, r, taskStateError(se, hint))
		return
	}
	s.writeError(w, r, err)
}
