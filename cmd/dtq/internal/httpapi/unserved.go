package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// WarningHeader is the response header that tells a producer something it
// should know about an accepted submission, e.g. that no live worker serves
// the task's queue.
const WarningHeader = "Dtq-Warning"

// DefaultServedCacheTTL is how long the API trusts its last reading of
// which queues live workers serve (Config.ServedCacheTTL).
const DefaultServedCacheTTL = 5 * time.Second

// maxWarnedQueues bounds the queues remembered as already warned about, so
// that many distinct queue names cannot grow the map without end.
const maxWarnedQueues = 10_000

// servedQueues answers "does a live worker serve queue q?" at submit time
// without a Redis read per submission: it reads the workers' heartbeat
// records (through the Inspector) at most once per ttl per API process and
// answers from that set until it is stale. A worker that started a moment
// ago may thus be missed for up to ttl, and one that died is still counted
// until its heartbeat is 3 intervals old (then Inspector stops calling it
// live) plus ttl. The answer only decides a warning, never whether a task
// is accepted.
type servedQueues struct {
	ttl  time.Duration
	read func(ctx context.Context) (map[string]bool, error)

	mu      sync.Mutex
	served  map[string]bool
	readAt  time.Time
	ok      bool // the last read succeeded
	warned  map[string]bool
	reading chan struct{} // non-nil while one request refreshes
}

// unserved reports whether no live worker serves q. known is false when
// the workers could not be read: then nothing is claimed either way.
func (c *servedQueues) unserved(ctx context.Context, q string) (unserved, known bool) {
	c.mu.Lock()
	for c.served == nil || time.Since(c.readAt) >= c.ttl {
		if c.reading != nil { // another request is reading: wait for it
			ch := c.reading
			c.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return false, false
			}
			c.mu.Lock()
			continue
		}
		ch := make(chan struct{})
		c.reading = ch
		c.mu.Unlock()
		served, err := c.read(ctx)
		c.mu.Lock()
		c.reading = nil
		close(ch)
		c.readAt, c.ok = time.Now(), err == nil
		if err == nil {
			c.served = served
		} else if c.served == nil {
			c.served = map[string]bool{}
		}
		break
	}
	defer c.mu.Unlock()
	if !c.ok {
		return false, false
	}
	return !c.served[q], true
}

// firstWarning reports whether q was not warned about since it was last
// seen served, and remembers it.
func (c *servedQueues) firstWarning(q string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.warned == nil {
		c.warned = map[string]bool{}
	}
	if c.warned[q] || len(c.warned) >= maxWarnedQueues {
		return false
	}
	c.warned[q] = true
	return true
}

// forgetWarning lets q be warned about again once it is unserved again.
func (c *servedQueues) forgetWarning(q string) {
	c.mu.Lock()
	delete(c.warned, q)
	c.mu.Unlock()
}

// liveQueues reads the queues live workers serve.
func (s *Server) liveQueues(ctx context.Context) (map[string]bool, error) {
	ws, err := allWorkers(ctx, s.cfg.Inspector)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, w := range ws {
		if !w.Live {
			continue
		}
		for _, q := range w.Queues {
			name, _, _ := strings.Cut(q, ":")
			out[name] = true
		}
	}
	return out, nil
}

// maxWarningLen bounds the Dtq-Warning value: a batch to a thousand
// unserved queues must not answer a thousand headers (clients refuse more
// than about 100) nor one of 50 KB.
const maxWarningLen = 512

// maxLoggedQueues bounds the queue names one warning log line lists.
const maxLoggedQueues = 10

// warnUnserved adds one Dtq-Warning header to an accepted submission when
// no live worker serves some of queues (those that got a new task, each
// once), naming as many as fit in maxWarningLen, and logs one line for the
// queues not warned about before (again after a queue was served in
// between), naming at most maxLoggedQueues of them.
func (s *Server) warnUnserved(w http.ResponseWriter, r *http.Request, queues []string) {
	var unservedQs, first []string
	for _, q := range queues {
		unserved, known := s.served.unserved(r.Context(), q)
		if !known {
			return
		}
		if !unserved {
			s.served.forgetWarning(q)
			continue
		}
		unservedQs = append(unservedQs, q)
		if s.served.firstWarning(q) {
			first = append(first, q)
		}
	}
	if len(unservedQs) == 0 {
		return
	}
	w.Header().Set(WarningHeader, unservedWarning(unservedQs))
	if len(first) == 0 {
		return
	}
	attrs := []any{"request_id", RequestIDFromContext(r.Context())}
	if len(first) == 1 {
		attrs = append(attrs, "queue", first[0])
	} else {
		attrs = append(attrs, "queues", first[:min(len(first), maxLoggedQueues)], "count", len(first))
	}
	s.log.WarnContext(r.Context(), "task accepted on a queue no live worker serves; it waits until a worker serves the queue", attrs...)
}

// unservedWarning is the Dtq-Warning value for queues (at least one), e.g.
// `no live worker serves queue "emails"` or `no live worker serves 3
// queues: "a", "b" and 1 more`, at most maxWarningLen bytes.
func unservedWarning(queues []string) string {
	if len(queues) == 1 {
		return "no live worker serves queue " + strconv.Quote(queues[0])
	}
	var b strings.Builder
	b.WriteString("no live worker serves " + strconv.Itoa(len(queues)) + " queues: ")
	for i, q := range queues {
		name := strconv.Quote(q)
		rest := len(queues) - i
		// Room for this name and, when more follow, for " and N more".
		tail := 0
		if rest > 1 {
			tail = len(" and  more") + len(strconv.Itoa(rest-1))
		}
		if b.Len()+2+len(name)+tail > maxWarningLen {
			b.WriteString(" and " + strconv.Itoa(rest) + " more")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
	}
	return b.String()
}
