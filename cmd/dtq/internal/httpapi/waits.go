package httpapi

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
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

// watch is one shared wait for a task or a workflow to end: a single
// poller, however many requests wait on it.
type watch[T any] struct {
	done    chan struct{} // closed once val and err are set
	val     *T
	err     error
	waiters int
	cancel  context.CancelFunc
}

// sharedWaits runs at most one watch per id: wait polls one id for up to
// a duration, ended tells whether what it answered has ended, and get
// reads it when a request's own wait runs out first.
type sharedWaits[T any] struct {
	mu      sync.Mutex
	byID    map[string]*watch[T]
	wait    func(ctx context.Context, id string, d time.Duration) (*T, error)
	ended   func(*T) bool
	get     func(ctx context.Context, id string) (*T, error)
	running sync.WaitGroup
}

// join returns id's watch, starting one when none runs. The poll outlives
// the request that started it (others may share it), so it keeps ctx's
// values but not its cancellation: the last waiter to leave stops it.
func (ws *sharedWaits[T]) join(ctx context.Context, id string) *watch[T] {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.byID[id]; w != nil {
		w.waiters++
		return w
	}
	if ws.byID == nil {
		ws.byID = map[string]*watch[T]{}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &watch[T]{done: make(chan struct{}), waiters: 1, cancel: cancel}
	ws.byID[id] = w
	ws.running.Go(func() {
		v, err := ws.wait(ctx, id, maxWait)
		ws.mu.Lock()
		if ws.byID[id] == w {
			delete(ws.byID, id)
		}
		ws.mu.Unlock()
		w.val, w.err = v, err
		close(w.done)
		cancel()
	})
	return w
}

// leave drops one waiter; the last one stops the poller.
func (ws *sharedWaits[T]) leave(id string, w *watch[T]) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.waiters--; w.waiters == 0 {
		if ws.byID[id] == w {
			delete(ws.byID, id)
		}
		w.cancel()
	}
}

// await waits up to d for id to end, sharing the poll with every other
// request waiting on it. It answers id as it is when the wait ends, or
// ctx's error when ctx ended first (the client left). What it answers may
// be shared with other requests: read it, never change it.
func (ws *sharedWaits[T]) await(ctx context.Context, id string, d time.Duration) (*T, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		w := ws.join(ctx, id)
		select {
		case <-w.done:
			ws.leave(id, w)
			if w.err != nil {
				return nil, w.err
			}
			if w.val != nil && ws.ended(w.val) {
				return w.val, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// That poll ended (it lasts at most maxWait): wait on a new one.
		case <-deadline.C:
			ws.leave(id, w)
			return ws.get(ctx, id)
		case <-ctx.Done():
			ws.leave(id, w)
			return nil, ctx.Err()
		}
	}
}
