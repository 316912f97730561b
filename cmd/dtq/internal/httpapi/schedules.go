package httpapi

import (
	"net/http"
	"slices"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/wire"
	"github.com/dtq-io/dtq/dtqtype"
)

// Schedules (docs/schedules.md) are global, but each targets one queue: a scoped key
// sees and changes only the schedules of its queues, so every schedule
// route checks the scope in its handler.

// scheduleName returns the {name} path value, refusing an invalid name.
func scheduleName(r *http.Request) (string, error) {
	n := r.PathValue("name")
	if !dtq.ValidScheduleName(n) {
		return "", badRequest("name", "name: must match ^[a-z0-9][a-z0-9_.-]{0,127}$ (lowercase letters, digits, '_', '.' and '-')")
	}
	return n, nil
}

// scopedSchedule returns schedule name after checking that the request's
// key may see its queue. A scoped key asking about a schedule of another
// queue gets 403, as for the queue itself.
func (s *Server) scopedSchedule(r *http.Request, name string) (*dtqtype.ScheduleInfo, error) {
	info, err := s.cfg.Admin.GetSchedule(r.Context(), name)
	if err != nil {
		return nil, queryError(err)
	}
	if err := requireScope(r, info.Queue); err != nil {
		return nil, err
	}
	return info, nil
}

// listSchedules is GET /api/v1/schedules?queue=&limit=&cursor=, in name
// order.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "queue", "limit", "cursor")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := parseLimit(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	queue := q.Get("queue")
	if queue != "" {
		if !dtq.ValidQueueName(queue) {
			s.writeError(w, r, badRequest("queue", "queue: must match ^[a-z0-9][a-z0-9_-]{0,63}$"))
			return
		}
		if err := requireScope(r, queue); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	res, err := s.cfg.Admin.ListSchedules(r.Context(), &dtq.ScheduleListParams{Queue: queue, Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	if k, ok := KeyFromContext(r.Context()); ok && k.Scoped() {
		res.Items = slices.DeleteFunc(res.Items, func(it *dtqtype.ScheduleInfo) bool { return !k.Allows(it.Queue) })
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// getSchedule is GET /api/v1/schedules/{name}.
func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	name, err := scheduleName(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.scopedSchedule(r, name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, info)
}

// putSchedule is PUT /api/v1/schedules/{name}: 201 with the new schedule,
// or 200 with the replaced one. Every invalid field is 400 INVALID_REQUEST
// with details.field.
func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	name, err := scheduleName(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := requireJSON(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, s.maxBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sch, err := wire.DecodeSchedule(name, body)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	queue := sch.Queue
	if queue == "" {
		queue = dtq.DefaultQueue
	}
	if err := requireScope(r, queue); err != nil {
		s.writeError(w, r, err)
		return
	}
	if k, ok := KeyFromContext(r.Context()); ok && k.Scoped() {
		// Replacing moves a schedule: the key must hold its old queue too.
		if old, err := s.cfg.Admin.GetSchedule(r.Context(), name); err == nil {
			if err := requireScope(r, old.Queue); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	info, created, err := s.cfg.Admin.PutSchedule(ctx, sch)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	status, detail := http.StatusOK, "replaced; "
	if created {
		status, detail = http.StatusCreated, "created; "
	}
	s.audited(r, "schedule.put", name, detail+info.Spec+" -> "+info.Queue)
	s.writeJSON(w, r, status, info)
}

// scheduleAction checks what every schedule action starts with: no query,
// no body but "{}", a valid {name} the key may act on.
func (s *Server) scheduleAction(w http.ResponseWriter, r *http.Request) (string, bool) {
	if err := actionInput(w, r); err != nil {
		s.writeError(w, r, err)
		return "", false
	}
	name, err := scheduleName(r)
	if err == nil {
		if k, ok := KeyFromContext(r.Context()); ok && k.Scoped() {
			_, err = s.scopedSchedule(r, name)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return "", false
	}
	return name, true
}

// deleteSchedule is DELETE /api/v1/schedules/{name}; the tasks it made
// stay.
func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	name, ok := s.scheduleAction(w, r)
	if !ok {
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	if err := s.cfg.Admin.DeleteSchedule(ctx, name); err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.audited(r, "schedule.delete", name, "")
	s.writeJSON(w, r, http.StatusOK, map[string]any{"name": name, "deleted": true})
}

// schedulePausedBody is the answer of pause and resume.
type schedulePausedBody struct {
	Name     string                `json:"name"`
	Paused   bool                  `json:"paused"`
	Changed  bool                  `json:"changed"`
	Schedule *dtqtype.ScheduleInfo `json:"schedule"`
}

// pauseSchedule is POST /api/v1/schedules/{name}/pause.
func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	s.setSchedulePaused(w, r, true)
}

// resumeSchedule is POST /api/v1/schedules/{name}/resume.
func (s *Server) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	s.setSchedulePaused(w, r, false)
}

func (s *Server) setSchedulePaused(w http.ResponseWriter, r *http.Request, pause bool) {
	name, ok := s.scheduleAction(w, r)
	if !ok {
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	act, action, was := s.cfg.Admin.ResumeSchedule, "schedule.resume", "running"
	if pause {
		act, action, was = s.cfg.Admin.PauseSchedule, "schedule.pause", "paused"
	}
	changed, err := act(ctx, name)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	detail := ""
	if !changed {
		detail = "already " + was
	}
	s.audited(r, action, name, detail)
	info, err := s.cfg.Admin.GetSchedule(ctx, name)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, schedulePausedBody{Name: name, Paused: pause, Changed: changed, Schedule: info})
}

// triggerSchedule is POST /api/v1/schedules/{name}/trigger: the
// schedule's task is submitted now (202 with the task), also while the
// schedule is paused. Submission errors are a submission's (429 QUEUE_FULL
// ...).
func (s *Server) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	name, ok := s.scheduleAction(w, r)
	if !ok {
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	res, err := s.cfg.Admin.TriggerSchedule(ctx, name)
	if res != nil {
		s.audited(r, "schedule.trigger", name, "task "+res.TaskID)
	}
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusAccepted, taskResponse{TaskInfo: res.Task, Duplicate: false})
}
