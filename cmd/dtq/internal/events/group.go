package events

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/rdb"
)

// streamsPerRead is the most streams one group reads, and so the most one
// XREAD names: 1,000 queues (plus the worker events) make 4 groups. A
// larger group saves connections but resends more ids with every XREAD,
// one per wake-up.
const streamsPerRead = 256

// group reads the event streams of up to streamsPerRead readers in one
// goroutine, so that the streams of many queues cost one Redis connection
// rather than one each.
//
// On a single Redis (a *redis.Client) it waits for news with one XREAD
// BLOCK that names every watched stream of the group, on a connection of
// its own: dialled when a stream of the group gets its first subscription,
// closed once none of its streams is watched.
//
// Redis Cluster refuses an XREAD whose streams hash to different slots
// (CROSSSLOT, even when one node holds them all), and every queue has a
// slot of its own. There the group polls instead: every StreamPollInterval
// one pipeline of non-blocking XREADs, one per watched stream, which the
// cluster client splits into one pipeline per node. The group then uses at
// most one connection per node at a time, from the API's own pool.
//
// Either way the XREAD only tells which streams have news; their entries
// are then read with readAfter, which also checks for trimming.
type group struct {
	hub *Hub

	mu      sync.Mutex
	readers []*reader // append-only

	resume chan struct{} // a token: a reader of the group got a subscription
}

func newGroup(h *Hub) *group { return &group{hub: h, resume: make(chan struct{}, 1)} }

func (g *group) full() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.readers) >= streamsPerRead
}

func (g *group) add(r *reader) {
	g.mu.Lock()
	g.readers = append(g.readers, r)
	g.mu.Unlock()
}

// wake ends the group's wait for a subscription (or, when polling, for
// the next poll).
func (g *group) wake() {
	select {
	case g.resume <- struct{}{}:
	default:
	}
}

// watched returns, in buf, the readers with a subscription, and parks the
// others.
func (g *group) watched(buf []*reader) []*reader {
	g.mu.Lock()
	all := g.readers // append-only: this prefix does not change
	g.mu.Unlock()
	out := buf[:0]
	for _, r := range all {
		if r.watched() {
			out = append(out, r)
			continue
		}
		if _, _, ready := r.tail(); ready {
			r.park()
		}
		r.due = false
	}
	return out
}

// run follows the group's watched streams until ctx ends, retrying Redis
// errors with backoff. It holds a connection only while some stream is
// watched.
func (g *group) run(ctx context.Context) {
	var (
		c       redis.UniversalClient
		release = func() {}
		failing backoff
		rs      []*reader
	)
	defer func() { release() }()
	for ctx.Err() == nil {
		rs = g.watched(rs)
		if len(rs) == 0 {
			release()
			c, release = nil, func() {}
			select {
			case <-g.resume:
			case <-ctx.Done():
				return
			}
			continue
		}
		if c == nil {
			c, release = g.hub.readClient()
		}
		if err := g.step(ctx, c, rs); err != nil {
			g.fail(ctx, &failing, len(rs), err)
			continue
		}
		if failing.recover() {
			g.hub.log.Info("event reader reconnected to Redis", "streams", len(rs))
		}
	}
}

// step starts the readers that have no position yet, reads the streams
// that have news, and when none has more waiting, waits for news.
func (g *group) step(ctx context.Context, c redis.UniversalClient, rs []*reader) error {
	var firstErr error
	busy := false
	for _, r := range rs {
		if _, _, ready := r.tail(); !ready {
			st, err := streamTail(ctx, c, r.key)
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			r.start(st)
			r.due = true // as the stream may have grown since
		}
		if !r.due {
			continue
		}
		full, err := g.read(ctx, c, r)
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		r.due = full
		busy = busy || full
	}
	if firstErr != nil || busy {
		return firstErr // busy: more is waiting
	}
	return g.wait(ctx, c, rs)
}

// read reads the entries after r's position into its ring, and reports
// whether it read a full batch (more may be waiting).
func (g *group) read(ctx context.Context, c redis.UniversalClient, r *reader) (bool, error) {
	h := g.hub
	last, lastOrd, _ := r.tail()
	msgs, st, err := readAfter(ctx, c, r.key, last, int64(h.cfg.BatchSize))
	if err != nil {
		return false, err
	}
	trimmed := st.trimmedAfter(last, lastOrd)
	if trimmed {
		h.log.Warn("event stream trimmed past its reader; clients behind it get a reset",
			"queue", r.queue, "last_read", last.String(), "trimmed_up_to", st.gone().String())
	}
	es := make([]*entry, 0, len(msgs))
	first := st.readOrd(msgs, last, lastOrd)
	for i, m := range msgs {
		e, err := decodeEntry(r.queue, m)
		if err != nil {
			h.log.Warn("skipping an unreadable event", "queue", r.queue, "id", m.ID, "err", err)
			continue
		}
		e.ord = ordAt(first, i)
		es = append(es, e)
	}
	if len(msgs) > 0 || trimmed {
		r.add(es, st)
	}
	return len(msgs) == h.cfg.BatchSize, nil
}

// wait marks the streams with an entry after their reader's position as
// due: on a single Redis it blocks up to Block for one; when polling it
// looks once and, finding nothing, waits for the next poll.
func (g *group) wait(ctx context.Context, c redis.UniversalClient, rs []*reader) error {
	h := g.hub
	keys, after := make([]string, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		last, _, _ := r.tail()
		keys[i], after[i] = r.key, last.String()
	}
	var (
		woke []int
		err  error
	)
	if h.blocking {
		woke, err = rdb.WaitAnyStream(ctx, c, keys, after, h.cfg.Block)
	} else {
		woke, err = rdb.PollAnyStream(ctx, c, keys, after)
	}
	for _, i := range woke {
		rs[i].due = true
	}
	if h.blocking || len(woke) > 0 || err != nil {
		return err
	}
	t := time.NewTimer(h.cfg.StreamPollInterval)
	defer t.Stop()
	select {
	case <-t.C:
	case <-g.resume: // a new subscription: look now
	case <-ctx.Done():
	}
	return nil
}

// fail logs a Redis error (once per outage at warning level) and waits out
// the backoff.
func (g *group) fail(ctx context.Context, b *backoff, streams int, err error) {
	if ctx.Err() != nil {
		return
	}
	if b.first() {
		g.hub.log.Warn("event reader lost Redis; retrying", "streams", streams, "err", err)
	} else {
		g.hub.log.Debug("event reader still failing", "streams", streams, "err", err)
	}
	b.sleep(ctx)
}
