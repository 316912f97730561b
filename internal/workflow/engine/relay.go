package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/dtq-io/dtq/internal/attempt"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Relay pacing.
const (
	// relayLease is how long a relay lock lives without renewal.
	relayLease = 5 * time.Second
	// relayBlock bounds one wait for outbox entries.
	relayBlock = time.Second
	// relayBatch is the entries one relay pass reads.
	relayBatch = 100
)

// relayPass carries out up to relayBatch entries of queue's outbox, in
// order, if this process holds the queue's relay lock (held). It returns
// the id of the last entry it carried out and whether the batch was full.
//
// The scripts per pass: one attention mark per workflow of the batch
// before any of its entries is applied (a crash from there on leaves the
// workflow to the sweep), one wf_apply per entry (and the releases it
// decided), one wf_ack for the whole batch, one unmark per workflow. A
// crash before the ack applies those entries again, which wf_apply answers
// as known. Per entry that is one script instead of four in a row, so that
// the relay keeps up with the workers' batched finalizes (a 10,000-leaf
// join, docs/benchmarks.md).
//
// An entry never holds back the ones behind it: one wf_apply fails on is
// parked in its workflow's slot (wf_park), and one whose releases or
// effects fail was applied; either way it is acknowledged, and its
// workflow's mark stays for the sweep, which retries with backoff. Only
// when parking fails too (Redis itself failing) does the pass stop, its
// entries left in the outbox.
func (e *Engine) relayPass(ctx context.Context, queue string) (held bool, last string, full bool, err error) {
	held, err = e.rdb.RelayLock(ctx, queue, e.token, relayLease)
	if err != nil || !held {
		return false, "", false, err
	}
	es, err := e.rdb.ReadOutbox(ctx, queue, relayBatch)
	if err != nil || len(es) == 0 {
		return true, "", false, err
	}
	score := e.cfg.Clock().UnixMilli()
	marks := map[string]rdb.Attention{}
	var order []string // the batch's workflows, in order
	for i := range es {
		id := es[i].Workflow
		if _, ok := marks[id]; ok {
			continue
		}
		m := rdb.NewAttention(id, score)
		if err := e.rdb.WorkflowMark(ctx, m, false); err != nil {
			return true, "", false, err
		}
		marks[id] = m
		order = append(order, id)
	}
	keep := map[string]bool{}
	ids := make([]string, len(es))
	for i := range es {
		en := &es[i]
		k, applied, err := e.apply(ctx, en, false)
		if err != nil && !applied {
			if _, perr := e.rdb.WorkflowPark(ctx, en); perr != nil {
				return true, "", false, err // the marks stay for the sweep
			}
		}
		if err != nil {
			e.log.Warn("workflow relay: an entry is left to the sweep", "queue", queue, "workflow_id", en.Workflow,
				"ref", en.Ref, "parked", !applied, "err", err)
		}
		if k || err != nil {
			keep[en.Workflow] = true
		}
		ids[i] = en.ID
	}
	if err := e.rdb.AckOutbox(ctx, queue, ids); err != nil {
		return true, "", false, err
	}
	for _, id := range order {
		if !keep[id] {
			if err := e.rdb.WorkflowUnmark(ctx, marks[id]); err != nil {
				return true, ids[len(ids)-1], false, err
			}
		}
	}
	return true, ids[len(ids)-1], len(es) == relayBatch, nil
}

// Relay scheduling. A process relays the workflow outboxes of many queues
// (a worker's own, or every registered queue for the API) with a number of
// Redis connections that does not grow with the number of queues: the
// queues are split into groups of relayGroupSize, and each group waits for
// new outbox entries with one read that names all its outboxes (a blocking
// XREAD on a connection of its own on a single Redis; a pipelined,
// non-blocking poll every relayPoll on Redis Cluster, whose queues lie in
// different slots). A queue is relayed (relayPass) only when its outbox
// has entries; passes run beside the wait, at most relayPasses at once per
// group, so one long pass holds up no other queue of its group.
const (
	// relayGroupSize is the most queues one group's read names.
	relayGroupSize = 256
	// relayPoll is how often a group polls its outboxes on Redis Cluster.
	relayPoll = 200 * time.Millisecond
	// relayPasses bounds the passes a group runs at once.
	relayPasses = 4
	// relayBusyBlock bounds a group's wait while some of its passes run:
	// a queue being relayed is left out of the wait, and looked at again
	// this soon after its pass ends.
	relayBusyBlock = 20 * time.Millisecond
)

// relayQueue is what a group knows of one queue's outbox.
type relayQueue struct {
	after string    // the newest entry id looked at: a newer one wakes the group
	retry time.Time // when to pass again whatever the wait says (zero: on news only)
	busy  bool      // a pass runs
	fails int       // passes failed in a row (backoff)
	held  bool      // this process held the relay lock at its last pass
}

// relayer relays the outboxes of the queues that queues returns.
type relayer struct {
	e      *Engine
	queues func(context.Context) []string
	// refresh is how often queues is called again (0: once).
	refresh time.Duration

	mu     sync.Mutex
	list   []string // sorted: group g relays list[g*relayGroupSize:][:relayGroupSize]
	groups int      // groups started
}

// RunRelays relays the workflow outboxes of the queues that queues returns
// (called again every refresh when refresh > 0; a nil answer keeps the
// last list) until ctx ends, then waits for the large releases carried
// out beside the passes.
func (e *Engine) RunRelays(ctx context.Context, queues func(context.Context) []string, refresh time.Duration) {
	r := &relayer{e: e, queues: queues, refresh: refresh}
	defer e.carry.wg.Wait() // large releases carried out beside the passes
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		r.setList(queues(ctx))
		r.mu.Lock()
		for ; r.groups*relayGroupSize < len(r.list); r.groups++ {
			g := r.groups
			wg.Go(func() { r.runGroup(ctx, g) })
		}
		r.mu.Unlock()
		if refresh <= 0 || !attempt.Sleep(ctx, refresh) {
			return
		}
	}
}

func (r *relayer) setList(qs []string) {
	if qs == nil {
		return // a failed listing keeps the last one
	}
	qs = slices.Clone(qs)
	slices.Sort(qs)
	qs = slices.Compact(qs)
	r.mu.Lock()
	r.list = qs
	r.mu.Unlock()
}

// members is group g's queues now.
func (r *relayer) members(g int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	lo := g * relayGroupSize
	if lo >= len(r.list) {
		return nil
	}
	return r.list[lo:min(lo+relayGroupSize, len(r.list))]
}

// group is one group's state, owned by its goroutine but for what passes
// write back under mu.
type relayGroup struct {
	r      *relayer
	mu     sync.Mutex
	qs     map[string]*relayQueue
	passes sync.WaitGroup
	slots  chan struct{}
	done   chan struct{} // a pass ended
}

// runGroup relays group g's queues until ctx ends, then gives up the relay
// locks it holds.
func (r *relayer) runGroup(ctx context.Context, g int) {
	gr := &relayGroup{r: r, qs: map[string]*relayQueue{}, slots: make(chan struct{}, relayPasses),
		done: make(chan struct{}, 1)}
	watch := r.e.rdb.WatchOutboxes()
	defer func() { _ = watch.Close() }()
	defer gr.release(ctx)
	defer gr.passes.Wait()
	failing := 0
	for ctx.Err() == nil {
		members := r.members(g)
		if len(members) == 0 {
			if !attempt.Sleep(ctx, max(r.refresh, relayBlock)) {
				return
			}
			continue
		}
		names, after, wait := gr.due(ctx, members)
		if len(names) == 0 {
			gr.sleep(ctx, wait)
			continue
		}
		woke, err := watch.Wait(ctx, names, after, wait)
		for _, i := range woke {
			gr.start(ctx, names[i])
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if failing == 0 {
				r.e.log.Warn("workflow relay: waiting for outbox entries failed; retrying with backoff", "queues", len(names), "err", err)
			}
			failing++
			attempt.Sleep(ctx, min(time.Duration(failing)*100*time.Millisecond, 5*time.Second))
		case !watch.Blocking() && len(woke) == 0:
			failing = 0
			gr.sleep(ctx, min(wait, relayPoll))
		default:
			failing = 0
		}
	}
}

// due starts the passes of members whose retry time came, forgets queues
// no longer in the group, and returns what to wait on: the members not
// being relayed, the outbox ids to wait after, and how long to wait at
// most.
func (gr *relayGroup) due(ctx context.Context, members []string) (names, after []string, wait time.Duration) {
	now := time.Now()
	wait = relayBlock
	in := make(map[string]bool, len(members))
	var start []string
	gr.mu.Lock()
	for _, q := range members {
		in[q] = true
		s := gr.qs[q]
		if s == nil {
			s = &relayQueue{after: "0-0"} // any entry wakes: a pass at once
			gr.qs[q] = s
		}
		switch {
		case s.busy:
			wait = min(wait, relayBusyBlock)
			continue
		case !s.retry.IsZero() && !now.Before(s.retry):
			start = append(start, q)
			wait = min(wait, relayBusyBlock)
			continue
		case s.fails > 0:
			// Backing off: entries left behind by the failed pass would
			// wake the wait at once.
			wait = min(wait, s.retry.Sub(now))
			continue
		case !s.retry.IsZero():
			wait = min(wait, s.retry.Sub(now))
		}
		after = append(after, s.after)
		names = append(names, q)
	}
	for q, s := range gr.qs {
		if !in[q] && !s.busy && !s.held {
			delete(gr.qs, q)
		}
	}
	gr.mu.Unlock()
	for _, q := range start {
		gr.start(ctx, q)
	}
	return names, after, max(wait, time.Millisecond)
}

// start runs a pass of queue q beside the wait, unless one runs already;
// it waits for a free slot first.
func (gr *relayGroup) start(ctx context.Context, q string) {
	gr.mu.Lock()
	s := gr.qs[q]
	if s == nil || s.busy {
		gr.mu.Unlock()
		return
	}
	s.busy = true
	gr.mu.Unlock()
	select {
	case gr.slots <- struct{}{}:
	case <-ctx.Done():
		gr.mu.Lock()
		s.busy = false
		gr.mu.Unlock()
		return
	}
	gr.passes.Go(func() {
		defer func() { <-gr.slots }()
		gr.pass(ctx, q, s)
		select {
		case gr.done <- struct{}{}:
		default:
		}
	})
}

// pass relays q's outbox until it is empty or another process holds its
// lock, and notes when to look at it again.
func (gr *relayGroup) pass(ctx context.Context, q string, s *relayQueue) {
	e := gr.r.e
	var (
		held  bool
		after string
		err   error
	)
	for ctx.Err() == nil {
		var last string
		var full bool
		held, last, full, err = e.relayPass(ctx, q)
		if err != nil || !held {
			break
		}
		if last != "" {
			after = last
		}
		if !full {
			break
		}
	}
	if err == nil && !held && ctx.Err() == nil {
		// Another process relays q: wait for news after what is there now,
		// and look again once its lock would have expired, should it die.
		if last, lerr := e.rdb.OutboxLastID(ctx, q); lerr == nil {
			after = last
		}
	}
	gr.mu.Lock()
	defer gr.mu.Unlock()
	s.busy, s.held, s.retry = false, held, time.Time{}
	if after != "" {
		s.after = after
	}
	switch {
	case ctx.Err() != nil:
	case err != nil:
		if s.fails == 0 {
			e.log.Warn("workflow relay failed; retrying with backoff", "queue", q, "err", err)
		}
		s.fails++
		s.retry = time.Now().Add(min(time.Duration(s.fails)*100*time.Millisecond, 5*time.Second))
	case !held:
		s.fails = 0
		s.retry = time.Now().Add(relayLease)
	default:
		s.fails = 0
	}
}

// sleep waits d, or less when a pass ends or ctx ends.
func (gr *relayGroup) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-gr.done:
	case <-ctx.Done():
	}
}

// release gives up the relay locks the group's passes held.
func (gr *relayGroup) release(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for q, s := range gr.qs {
		if s.held {
			_, _ = gr.r.e.rdb.RelayLock(ctx, q, gr.r.e.token, 0)
		}
	}
}
