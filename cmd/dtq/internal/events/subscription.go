package events

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrCursorExpired means a subscription's position in some queue is older
// than the events Redis still holds: events were trimmed before it read
// them. It is returned inside a *ResetError.
var ErrCursorExpired = errors.New("events: cursor is older than the retained events")

// ResetError is returned by Subscription.Next when the subscription's
// position had been trimmed away. The subscription has moved on to Cursor,
// a fresh position at the live end of the feed; the client should reload
// whatever state it derives from events and continue from there.
type ResetError struct {
	// Queue is the queue (or SysQueue) whose events were trimmed.
	Queue string
	// Cursor is the fresh cursor the subscription continues from.
	Cursor string
}

// Error says which queue's position fell out of retention.
func (e *ResetError) Error() string {
	return fmt.Sprintf("events: the position in queue %s is older than the retained events", e.Queue)
}

// Unwrap returns ErrCursorExpired.
func (e *ResetError) Unwrap() error { return ErrCursorExpired }

// Event is one delivered event.
type Event struct {
	// ID is the envelope's event_id.
	ID string
	// Type is the event type.
	Type string
	// Queue is the stream it came from: a queue name, or SysQueue.
	Queue string
	// TaskID is the task the event is about, or "".
	TaskID string
	// Data is the envelope as JSON. It is shared: do not modify it.
	Data []byte
	// Cursor is the position just after this event: resuming from it
	// delivers what follows.
	Cursor string
}

// Subscription is one client's view of the feed: a filter and a cursor.
// Next returns its events in order within each queue. A Subscription is
// used by one goroutine; Close releases it.
type Subscription struct {
	hub    *Hub
	filter Filter
	cur    *Cursor
	notify chan struct{} // a token: some reader has news

	gen     uint64             // hub.gen when the sources were last synced
	sources []*reader          // attached readers, read round-robin
	byQueue map[string]*reader // the same, by queue
	next    int                // the source to try first
	pending []*entry           // read from one source, not yet returned
	closed  bool
}

// Subscribe opens a subscription with filter f from cursor c; nil c means
// "from now". It fails with a *FilterError for a bad filter and with
// ErrHubClosed after Run returned and with ErrTooManySubscribers when
// Config.MaxSubscribers are open. Close the subscription when done. ctx
// bounds the Redis reads that find "now" in the streams whose readers are
// parked, and the registry look-up of a cursor's unknown queues: a cursor
// keeps positions only for queues of the registry (docs/security.md), so a forged
// one cannot make every frame carry thousands of made-up queues.
func (h *Hub) Subscribe(ctx context.Context, f Filter, c *Cursor) (*Subscription, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if c != nil {
		c = h.knownQueuesOnly(ctx, c)
	}
	s := &Subscription{hub: h, filter: f, notify: make(chan struct{}, 1), byQueue: map[string]*reader{}}
	h.mu.Lock()
	select {
	case <-h.done:
		h.mu.Unlock()
		return nil, ErrHubClosed
	default:
	}
	if len(h.subs) >= h.cfg.MaxSubscribers {
		h.mu.Unlock()
		h.refused.Add(1)
		return nil, ErrTooManySubscribers
	}
	var parked []*reader
	if c == nil {
		s.cur, parked = h.freshCursorLocked(&f)
	} else {
		s.cur = c.clone()
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	// A parked reader does not know the stream's end: ask Redis. Should
	// Redis not answer, the cursor's start time (a moment ago) stands in.
	for _, r := range parked {
		if st, err := streamTail(ctx, h.main, r.key); err == nil && s.cur.position(r.queue).less(st.lastGenerated) {
			s.cur.setAt(r.queue, st.lastGenerated, st.entriesAdded)
		}
	}
	s.sync() // attach now: the readers run while anyone subscribes
	return s, nil
}

// knownQueuesOnly returns c, or a copy of it without the positions of
// queues that are not in the registry. Queues the hub reads are known; the
// others are looked up in one read (a queue created a moment ago may not
// have a reader yet). Should the look-up fail, c is kept: its size is
// bounded anyway.
func (h *Hub) knownQueuesOnly(ctx context.Context, c *Cursor) *Cursor {
	var unknown []string
	h.mu.Lock()
	for q := range c.pos {
		if _, ok := h.readers[q]; !ok && q != SysQueue {
			unknown = append(unknown, q)
		}
	}
	h.mu.Unlock()
	if len(unknown) == 0 {
		return c
	}
	exists, err := h.rdb.QueuesExist(ctx, unknown)
	if err != nil {
		return c
	}
	c = c.clone()
	for i, q := range unknown {
		if !exists[i] {
			delete(c.pos, q)
			delete(c.ord, q)
		}
	}
	return c
}

// freshStartMargin backdates the start of a fresh cursor. Ids come from
// Redis's clock, which the hub only estimates, and a queue created just
// before the subscription may not be known yet: its first events are better
// sent than lost.
const freshStartMargin = time.Second

// freshCursorLocked returns a cursor at the live end of the feed: for each
// queue with a running reader, the newest event it has read; for the others
// (queues not known yet, and parked readers, which it also returns), a
// moment ago. h.mu is held.
func (h *Hub) freshCursorLocked(f *Filter) (*Cursor, []*reader) {
	c := NewCursor(h.now().Add(-freshStartMargin))
	var parked []*reader
	for q, r := range h.readers {
		if !f.readsQueue(q) {
			continue
		}
		last, ord, ok := r.tail()
		if !ok {
			parked = append(parked, r)
			continue
		}
		if c.position(q).less(last) {
			c.setAt(q, last, ord)
		}
	}
	return c, parked
}

// Cursor returns the position after the last event returned (or skipped
// by the filter).
func (s *Subscription) Cursor() string { return s.cur.String() }

// Close ends the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	if s.closed {
		return
	}
	s.closed = true
	for _, r := range s.sources {
		r.detach(s)
	}
	s.hub.mu.Lock()
	delete(s.hub.subs, s)
	s.hub.mu.Unlock()
}

func (s *Subscription) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next returns the next event that passes the filter, waiting for one as
// long as ctx allows. It returns ctx's error when ctx ends, ErrHubClosed
// when the hub stops, and a *ResetError when the position was trimmed away
// (the subscription then continues from the fresh cursor). Cancelling ctx
// loses nothing: the next call carries on where this one stopped. Redis
// outages are waited out.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	var failing backoff
	for {
		for len(s.pending) > 0 {
			e := s.pending[0]
			s.pending[0] = nil
			s.pending = s.pending[1:]
			s.cur.setAt(e.queue, e.id, e.ord)
			if e.data != nil && s.filter.match(e) {
				return Event{ID: e.queue + "/" + e.id.String(), Type: e.typ, Queue: e.queue, TaskID: e.taskID,
					Data: e.data, Cursor: s.cur.String()}, nil
			}
		}
		if err := ctx.Err(); err != nil {
			return Event{}, err
		}
		select {
		case <-s.hub.done:
			return Event{}, ErrHubClosed
		default:
		}
		s.sync()
		progressed, err := s.fill(ctx)
		if err != nil {
			var re *ResetError
			if errors.As(err, &re) || ctx.Err() != nil {
				return Event{}, err
			}
			s.hub.log.Debug("event catch-up read failed; retrying", "err", err)
			failing.sleep(ctx)
			continue
		}
		failing.recover()
		if progressed {
			continue
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-s.hub.done:
			return Event{}, ErrHubClosed
		}
	}
}

// sync attaches the readers added to the hub since the last look.
func (s *Subscription) sync() {
	h := s.hub
	h.mu.Lock()
	if s.gen == h.gen {
		h.mu.Unlock()
		return
	}
	s.gen = h.gen
	var add []*reader
	for q, r := range h.readers {
		if _, ok := s.byQueue[q]; !ok && s.filter.readsQueue(q) {
			add = append(add, r)
		}
	}
	h.mu.Unlock()
	for _, r := range add {
		r.attach(s)
		s.byQueue[r.queue] = r
		s.sources = append(s.sources, r)
	}
}

// fill loads the next entries of one source into pending, or moves a
// position on. It reports whether anything changed.
func (s *Subscription) fill(ctx context.Context) (bool, error) {
	n := len(s.sources)
	for i := range n {
		k := (s.next + i) % n
		r := s.sources[k]
		pos := s.cur.position(r.queue)
		es, st := r.after(pos, s.hub.cfg.BatchSize)
		switch st {
		case readOK:
			if len(es) == 0 {
				continue
			}
			s.pending = es
		case readMiss:
			moved, err := s.catchUp(ctx, r, pos)
			if err != nil {
				return false, err
			}
			if !moved {
				continue
			}
		case readNotReady:
			continue
		}
		s.next = (k + 1) % n
		return true, nil
	}
	return false, nil
}

// catchUp reads the entries after pos from Redis, for a subscription that
// is behind the reader's ring. It returns a *ResetError when entries after
// pos were trimmed.
func (s *Subscription) catchUp(ctx context.Context, r *reader, pos streamID) (bool, error) {
	h := s.hub
	h.catchupReads.Add(1)
	r.mu.RLock()
	baseBefore, baseOrdBefore, lastBefore := r.base, r.baseOrd, r.last
	r.mu.RUnlock()
	posOrd := s.cur.ordinal(r.queue)
	msgs, st, err := readAfter(ctx, h.main, r.key, pos, int64(h.cfg.BatchSize))
	if err != nil {
		return false, err
	}
	if st.trimmedAfter(pos, posOrd) {
		return false, s.reset(r, st)
	}
	if len(msgs) == 0 {
		// Nothing exists after pos up to the stream's newest id.
		np, npOrd := pos, posOrd
		if pos.less(st.lastGenerated) {
			np, npOrd = st.lastGenerated, st.entriesAdded
		}
		if st.lastGenerated.less(lastBefore) && np.less(baseBefore) {
			// The stream lost entries the reader had read (Redis restarted
			// without them): go on with what the ring still holds.
			np, npOrd = baseBefore, baseOrdBefore
		}
		if np == pos {
			return false, nil
		}
		s.cur.setAt(r.queue, np, npOrd)
		return true, nil
	}
	first := st.readOrd(msgs, pos, posOrd)
	es := make([]*entry, 0, len(msgs))
	for i, m := range msgs {
		e, err := decodeEntry(r.queue, m)
		if err != nil {
			// Never delivered by the reader either; step over it.
			if id, perr := parseStreamID(m.ID); perr == nil {
				es = append(es, &entry{id: id, queue: r.queue, ord: ordAt(first, i)})
			}
			continue
		}
		e.ord = ordAt(first, i)
		es = append(es, e)
	}
	s.pending = es
	return true, nil
}

// reset moves the subscription past the part of r's stream that was
// trimmed away, to the live end of that queue. Its positions in other
// queues stay: nothing was lost there.
func (s *Subscription) reset(r *reader, st streamState) error {
	s.hub.resets.Add(1)
	np, npOrd := st.gone(), st.goneOrd()
	if last, lastOrd, ok := r.tail(); ok && np.less(last) {
		np, npOrd = last, lastOrd
	}
	s.cur.setAt(r.queue, np, npOrd)
	s.pending = nil
	return &ResetError{Queue: r.queue, Cursor: s.cur.String()}
}
