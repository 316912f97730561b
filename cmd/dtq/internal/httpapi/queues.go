package httpapi

import (
	"fmt"
	"net/http"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// queueListPage is the answer of GET /api/v1/queues: a list page, and on
// the first page the totals over every queue the caller may see.
type queueListPage struct {
	Items      []*dtqtype.QueueInfo `json:"items"`
	NextCursor *string              `json:"next_cursor"`
	Totals     *dtqtype.QueueTotals `json:"totals,omitempty"`
	// RedisMemory, on the first page, is Redis's memory use, when Redis
	// reports it.
	RedisMemory *dtqtype.RedisMemory `json:"redis_memory,omitempty"`
}

// listQueues is GET /api/v1/queues?limit=&cursor=: queues by name, a page
// at a time (100 by default, at most 1000). A scoped key lists its queues
// only.
func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) {
	q, limit, err := listQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var only []string
	if k, ok := KeyFromContext(r.Context()); ok && k.Scoped() {
		only = k.Queues
	}
	cursor := q.Get("cursor")
	res, err := s.cfg.Inspector.ListQueues(r.Context(), &dtq.QueueListParams{Only: only, Cursor: cursor, Limit: limit})
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	p := queueListPage{Items: res.Items}
	if res.NextCursor != "" {
		p.NextCursor = &res.NextCursor
	}
	if cursor == "" {
		// The first page carries the totals, so that a dashboard can show
		// sums over every queue without reading every page.
		sizes, err := s.cfg.Inspector.QueueSizes(r.Context(), only)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		var t dtqtype.QueueTotals
		for _, sz := range sizes {
			t.Add(sz)
		}
		p.Totals = &t
		if p.RedisMemory, err = s.cfg.Inspector.RedisMemory(r.Context()); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.writeJSON(w, r, http.StatusOK, p)
}

// getQueue is GET /api/v1/queues/{queue}.
func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) {
	serveLookup(s, w, r, s.cfg.Inspector.GetQueue, "queue")
}

// pausedBody is the answer of pause and resume.
type pausedBody struct {
	Queue   string `json:"queue"`
	Paused  bool   `json:"paused"`
	Changed bool   `json:"changed"`
}

// pauseQueue is POST /api/v1/queues/{queue}/pause.
func (s *Server) pauseQueue(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, true) }

// resumeQueue is POST /api/v1/queues/{queue}/resume.
func (s *Server) resumeQueue(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

// queueAction checks what every queue action starts with: its (optional)
// body and the {queue} in the path, whose name it returns.
func queueAction(w http.ResponseWriter, r *http.Request) (string, error) {
	if err := actionInput(w, r); err != nil {
		return "", err
	}
	return queueParam(r)
}

// setPaused pauses or resumes a queue. Any valid name is accepted, even one
// not used yet, so that a queue can be paused before its first task.
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, pause bool) {
	q, err := queueAction(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	act, action, was := s.cfg.Admin.ResumeQueue, "queue.resume", "running"
	if pause {
		act, action, was = s.cfg.Admin.PauseQueue, "queue.pause", "paused"
	}
	changed, err := act(ctx, q, actorOf(r).name)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	detail := ""
	if !changed {
		detail = "already " + was
	}
	s.audited(r, action, q, detail)
	s.writeJSON(w, r, http.StatusOK, pausedBody{Queue: q, Paused: pause, Changed: changed})
}

// queueParam returns the {queue} path value, refusing an invalid name.
func queueParam(r *http.Request) (string, error) {
	q := r.PathValue("queue")
	if !dtq.ValidQueueName(q) {
		return "", badRequest("queue", "queue: must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	return q, nil
}

// purgeQueue is POST /api/v1/queues/{queue}/purge: every ready task of the
// queue is cancelled; delayed, retrying and running ones are left alone.
func (s *Server) purgeQueue(w http.ResponseWriter, r *http.Request) {
	q, err := queueAction(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	n, err := s.cfg.Admin.PurgeQueue(ctx, q)
	if n > 0 || err == nil {
		s.audited(r, "queue.purge", q, partial(err, "cancelled %d", n))
	}
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, map[string]any{"queue": q, "cancelled": n})
}

// recountQueue is POST /api/v1/queues/{queue}/recount: the depth counter
// is recomputed from the queue's structures.
func (s *Server) recountQueue(w http.ResponseWriter, r *http.Request) {
	q, err := queueAction(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	old, depth, err := s.cfg.Admin.RecountQueue(ctx, q)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.audited(r, "queue.recount", q, fmt.Sprintf("depth %d -> %d", old, depth))
	s.writeJSON(w, r, http.StatusOK, map[string]any{"queue": q, "old_depth": old, "depth": depth})
}

// createQueue is PUT /api/v1/queues/{queue}: the queue is added to the
// registry (201), or already was (200). Under the declared policy only such
// queues accept tasks.
//
// The body is optional: {"partitions": P} (1..256) creates the queue with P
// partitions (docs/partitions.md); an existing queue with other partitions
// is 409 PARTITIONS_CONFLICT, and a PUT without partitions never changes
// them.
func (s *Server) createQueue(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := queueParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var body struct {
		Partitions *int `json:"partitions"`
	}
	if _, err := decodeActionBody(w, r, &body, `{"partitions": 8}`); err != nil {
		s.writeError(w, r, err)
		return
	}
	var opts dtq.QueueOptions
	if body.Partitions != nil {
		if *body.Partitions < 1 || *body.Partitions > dtq.MaxPartitions {
			s.writeError(w, r, badRequest("partitions", "partitions: must be 1..%d", dtq.MaxPartitions))
			return
		}
		opts.Partitions = *body.Partitions
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	created, err := s.cfg.Admin.CreateQueue(ctx, q, &opts)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	parts, err := s.cfg.Admin.QueuePartitions(ctx, q)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	status, detail := http.StatusCreated, fmt.Sprintf("%d partition(s)", parts)
	if !created {
		status, detail = http.StatusOK, "already existed"
	}
	s.audited(r, "queue.create", q, detail)
	s.writeJSON(w, r, status, map[string]any{"queue": q, "created": created, "partitions": parts})
}

// deleteQueue is DELETE /api/v1/queues/{queue}: an empty queue leaves the
// registry, freeing its number; one holding tasks is 409 QUEUE_NOT_EMPTY.
func (s *Server) deleteQueue(w http.ResponseWriter, r *http.Request) {
	q, err := queueAction(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	if err := s.cfg.Admin.DeleteQueue(ctx, q); err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.audited(r, "queue.delete", q, "")
	s.writeJSON(w, r, http.StatusOK, map[string]any{"queue": q, "deleted": true})
}
