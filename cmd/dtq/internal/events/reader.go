package events

import (
	"context"
	"sort"
	"sync"
	"time"
)

// reader is the one reader of one queue's event stream in this process. It
// follows the stream (its group does the Redis reads, see group.go) and
// keeps its newest entries in a ring that every subscription of the queue
// reads from; a subscription whose position is older than the ring reads
// from Redis instead (catch-up) until it is back inside the ring. So a slow client costs its own Redis reads, never memory
// or the other clients' latency.
//
// A reader with no subscription parks: it reads nothing, so an API process
// that nobody watches does not read every event its submissions write. The
// first subscription to attach wakes it, and it starts again from the
// stream's end; subscriptions behind that read from Redis.
type reader struct {
	hub   *Hub
	group *group // reads the stream; nil only in unit tests
	queue string
	key   string
	due   bool // entries may wait after last; only the group's goroutine uses it

	mu      sync.RWMutex
	ready   bool     // base and last are known
	base    streamID // the ring holds every entry in (base, last]
	last    streamID // the newest id read
	baseOrd int64    // base's ordinal, or unknownOrd
	lastOrd int64    // last's ordinal, or unknownOrd
	ring    []*entry
	subs    map[*Subscription]struct{}
}

// readStatus is what a ring lookup found.
type readStatus int

const (
	readOK       readStatus = iota // the entries after pos (maybe none)
	readMiss                       // pos is older than the ring: catch up from Redis
	readNotReady                   // the reader has not found its start yet
)

func newReader(h *Hub, queue, key string) *reader {
	return &reader{hub: h, queue: queue, key: key, subs: map[*Subscription]struct{}{}}
}

// after returns up to limit entries after pos from the ring.
func (r *reader) after(pos streamID, limit int) ([]*entry, readStatus) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.ready {
		return nil, readNotReady
	}
	if pos.less(r.base) {
		return nil, readMiss
	}
	i := sort.Search(len(r.ring), func(i int) bool { return pos.less(r.ring[i].id) })
	n := min(len(r.ring)-i, limit)
	if n == 0 {
		return nil, readOK
	}
	out := make([]*entry, n)
	copy(out, r.ring[i:i+n])
	return out, readOK
}

// tail returns the newest id read and its ordinal, and whether the reader
// has started.
func (r *reader) tail() (streamID, int64, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.last, r.lastOrd, r.ready
}

func (r *reader) attach(s *Subscription) {
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	if r.group != nil {
		r.group.wake()
	}
}

// watched reports whether any subscription is attached.
func (r *reader) watched() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.subs) > 0
}

// park forgets the reader's position and ring until it starts again.
func (r *reader) park() {
	r.mu.Lock()
	r.ready, r.ring = false, nil
	r.mu.Unlock()
}

func (r *reader) detach(s *Subscription) {
	r.mu.Lock()
	delete(r.subs, s)
	r.mu.Unlock()
}

// start sets the reader's first position: the stream's newest id. Older
// entries are served by catch-up reads to the subscriptions that need them.
func (r *reader) start(st streamState) {
	r.mu.Lock()
	r.ready, r.base, r.last = true, st.lastGenerated, st.lastGenerated
	r.baseOrd, r.lastOrd = st.entriesAdded, st.entriesAdded
	r.mu.Unlock()
	r.wake()
}

// add appends entries read after r.last. When Redis trimmed entries the
// reader had not read yet, the ring restarts after the trimmed part;
// subscriptions that needed those entries find out in their own catch-up
// read and get a reset.
func (r *reader) add(es []*entry, st streamState) {
	r.mu.Lock()
	if st.trimmedAfter(r.last, r.lastOrd) {
		r.ring = nil
		r.base, r.baseOrd = st.gone(), st.goneOrd()
		r.last, r.lastOrd = r.base, r.baseOrd // trimmed after last: base is newer
	}
	for _, e := range es {
		if r.last.less(e.id) {
			r.ring = append(r.ring, e)
			r.last, r.lastOrd = e.id, e.ord
		}
	}
	if over := len(r.ring) - r.hub.cfg.RingSize; over > 0 {
		r.base, r.baseOrd = r.ring[over-1].id, r.ring[over-1].ord
		clear(r.ring[:over])
		r.ring = r.ring[over:]
	}
	r.mu.Unlock()
	r.wake()
}

// wake tells every attached subscription to look for new entries.
func (r *reader) wake() {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for s := range r.subs {
		s.wake()
	}
}

// backoff doubles a delay from 50 ms up to 2 s while an operation fails.
type backoff struct {
	failures int
}

const (
	backoffFirst = 50 * time.Millisecond
	backoffLast  = 2 * time.Second
)

func (b *backoff) first() bool { return b.failures == 0 }

// recover resets the backoff and reports whether there were failures.
func (b *backoff) recover() bool {
	was := b.failures > 0
	b.failures = 0
	return was
}

func (b *backoff) delay() time.Duration {
	d := backoffFirst << min(b.failures, 10)
	return min(d, backoffLast)
}

func (b *backoff) sleep(ctx context.Context) {
	t := time.NewTimer(b.delay())
	defer t.Stop()
	b.failures++
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
