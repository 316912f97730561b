package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/dtq-io/dtq"
)

// In open mode there is no key to name: the audit log shows this actor and
// role instead.
const (
	anonymousActor = "anonymous"
	openModeRole   = "open"
)

// auditTimeout bounds the audit append after an action.
const auditTimeout = 5 * time.Second

// actor is who performs a request: the key's name and role.
type actor struct {
	name string
	role string
}

func actorOf(r *http.Request) actor {
	if k, ok := KeyFromContext(r.Context()); ok {
		return actor{name: k.Name, role: k.Role.String()}
	}
	return actor{name: anonymousActor, role: openModeRole}
}

// audited records an action that took effect, fully or in part: one entry
// in the audit stream and one log line. A failed append is logged, not
// answered, because the action itself already happened.
func (s *Server) audited(r *http.Request, action, target, detail string) {
	a := actorOf(r)
	id := RequestIDFromContext(r.Context())
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	err := s.cfg.Admin.Audit(ctx, dtq.AuditRecord{Actor: a.name, Role: a.role, Action: action,
		Target: target, RequestID: id, Detail: detail})
	s.log.InfoContext(r.Context(), "admin action", "action", action, "actor", clean(a.name),
		"target", clean(target), "request_id", id)
	if err != nil {
		s.log.ErrorContext(r.Context(), "audit append failed; the action took effect but is missing from the audit log",
			"action", action, "actor", clean(a.name), "target", clean(target), "request_id", id, "err", clean(err.Error()))
	}
}

// listAudit is GET /api/v1/audit?limit=&cursor=.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "limit", "cursor")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := parseLimit(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.Inspector.ListAudit(r.Context(), &dtq.AuditListParams{Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}
