package httpapi

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
)

// Long-poll bounds (Config.MaxWaits, Config.MaxWaitsPerKey).
const (
	DefaultMaxWaits       = 1000
	DefaultMaxWaitsPerKey = 100
)

// waitLimits counts the long-polls in flight, in total and per caller (the
// API key's name, or the client address in open mode).
type waitLimits struct {
	mu            sync.Mutex
	total, perKey int // the limits
	inFlight      int
	byKey         map[string]int
}

// acquire takes one long-poll for caller, or answers which bound refused
// it ("key" or "total"). Caller "" counts against the total only: an HTTP
// worker's claim, since a fleet of workers may share one key (their
// worker ids are bounded per key instead).
func (l *waitLimits) acquire(caller string) (refused string, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case caller != "" && l.byKey[caller] >= l.perKey:
		return "key", l.perKey
	case l.inFlight >= l.total:
		return "total", l.total
	}
	l.inFlight++
	if caller != "" {
		if l.byKey == nil {
			l.byKey = map[string]int{}
		}
		l.byKey[caller]++
	}
	return "", 0
}

func (l *waitLimits) release(caller string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	if caller == "" {
		return
	}
	if l.byKey[caller]--; l.byKey[caller] <= 0 {
		delete(l.byKey, caller)
	}
}

// caller names who a long-poll counts against: the key, or in open mode
// the client's address.
func caller(r *http.Request) string {
	if st := stateFrom(r.Context()); st != nil && st.keyName != "" {
		return "key:" + st.keyName
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// taskWatch is one shared wait for a task to finish: a single poller,
// however many requests wait on the task.
type taskWatch struct {
	done    chan struct{} // closed once task and err are set
	task    *dtqtype.TaskInfo
	err     error
	waiters int
	cancel  context.CancelFunc
}

// taskWatches runs at most one taskWatch per task id.
type taskWatches struct {
	mu      sync.Mutex
	byID    map[string]*taskWatch
	wait    func(ctx context.Context, id string, d time.Duration) (*dtqtype.TaskInfo, error)
	running sync.WaitGroup
}

// join returns the task's watch, starting one when none runs.
func (ws *taskWatches) join(id string) *taskWatch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.byID[id]; w != nil {
		w.waiters++
		return w
	}
	if ws.byID == nil {
		ws.byID = map[string]*taskWatch{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &taskWatch{done: make(chan struct{}), waiters: 1, cancel: cancel}
	ws.byID[id] = w
	ws.running.Add(1)
	go func() {
		defer ws.running.Done()
		t, err := ws.wait(ctx, id, maxWait)
		ws.mu.Lock()
		if ws.byID[id] == w {
			delete(ws.byID, id)
		}
		ws.mu.Unlock()
		w.task, w.err = t, err
		close(w.done)
		cancel()
	}()
	return w
}

// leave drops one waiter; the last one stops the poller.
func (ws *taskWatches) leave(id string, w *taskWatch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.waiters--; w.waiters == 0 {
		if ws.byID[id] == w {
			delete(ws.byID, id)
		}
		w.cancel()
	}
}

// waitTask waits up to d for task id to finish, sharing the poll with every
// other request waiting on it. It answers the task as it is when the wait
// ends, or ctx's error when ctx ended first (the client left).
func (s *Server) waitTask(ctx context.Context, id string, d time.Duration) (*dtqtype.TaskInfo, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		w := s.watches.join(id)
		select {
		case <-w.done:
			s.watches.leave(id, w)
			if w.err != nil {
				return nil, w.err
			}
			if w.task != nil && w.task.Status.Terminal() {
				return w.task, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// That poll ended (it lasts at most maxWait): wait on a new one.
		case <-deadline.C:
			s.watches.leave(id, w)
			return s.cfg.Inspector.GetTask(ctx, id)
		case <-ctx.Done():
			s.watches.leave(id, w)
			return nil, ctx.Err()
		}
	}
}
