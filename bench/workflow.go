package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// wfRun is one workflow latency run: joins of deps leaves (rounds times)
// and chains of chainLen nodes (chains times).
type wfRun struct {
	deps, rounds     int
	chains, chainLen int
	concurrency      int
	cluster          bool
	trace            bool
}

// wfLatency is what a workflow latency run prints, once per kind (join,
// hop): the release latency measured on Redis's clock (stream entry ids),
// and the handler-to-handler time measured in the process.
type wfLatency struct {
	Kind    string  `json:"kind"`
	Backend string  `json:"backend"`
	Samples int     `json:"samples"`
	Deps    int     `json:"deps,omitempty"`
	P50ms   float64 `json:"release_p50_ms"`
	P99ms   float64 `json:"release_p99_ms"`
	MaxMs   float64 `json:"release_max_ms"`
	HP50ms  float64 `json:"handler_p50_ms"`
	HP99ms  float64 `json:"handler_p99_ms"`
	HMaxMs  float64 `json:"handler_max_ms"`
	Seconds float64 `json:"seconds"`
	// RedisCPU and ProcCPU are the CPU seconds Redis (all masters) and
	// this process (client, worker, relays) spent per second of the run.
	RedisCPU float64 `json:"redis_cpu_per_second"`
	ProcCPU  float64 `json:"process_cpu_per_second"`
	Note     string  `json:"note,omitempty"`
}

// wfBench is a Redis (one server or a cluster), a client and a worker
// whose handlers stamp when they start and return.
type wfBench struct {
	rc       redis.UniversalClient
	client   *dtq.Client
	keys     rdb.Keys
	queues   []string // leaves round-robin; a join on queues[0]
	backend  string
	trace    bool
	mu       sync.Mutex
	started  map[string]int64 // task id -> handler start (unix ns)
	returned map[string]int64 // task id -> handler return (unix ns)
}

// workflowLatency runs the workflow latency scenarios (see docs/benchmarks.md,
// "Workflow release latency") and prints one table line and one JSON line
// per kind. It answers the process's exit code.
func workflowLatency(ctx context.Context, run wfRun) int {
	b := &wfBench{keys: rdb.NewKeys("dtq"), started: map[string]int64{}, returned: map[string]int64{}}
	if run.cluster {
		c, err := redistest.StartCluster(3, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Stop()
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 256})
		defer cc.Close()
		b.rc, b.backend = cc, "cluster"
		qs, err := queuesOnMasters(ctx, c, b.keys)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		b.queues = qs
	} else {
		srv, err := redistest.Start("--hash-max-listpack-value", "1024")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer srv.Stop()
		rc := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 256})
		defer rc.Close()
		b.rc, b.backend, b.queues = rc, "single", []string{"wa", "wb", "wc"}
	}
	b.trace = run.trace
	if b.trace {
		forEachMaster(ctx, b.rc, func(rc *redis.Client) {
			rc.ConfigSet(ctx, "slowlog-log-slower-than", "10000")
			rc.SlowLogReset(ctx)
		})
	}
	// Event streams long enough to hold a whole round's events: they are
	// where the times are read.
	const eventsMaxLen = 1_000_000
	d, err := dtq.Open(b.rc, &dtq.DeploymentConfig{EventsMaxLen: eventsMaxLen})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	client, err := d.NewClient(&dtq.ClientConfig{MaxQueueDepth: 10_000_000, MaxWorkflowNodes: max(run.deps+1, 100)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b.client = client
	weights := map[string]int{}
	for _, q := range b.queues {
		weights[q] = 1
	}
	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: weights, Concurrency: run.concurrency, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w.HandleFunc("leaf", b.stamp())
	w.HandleFunc("join", b.stamp())
	stop := runWorker(ctx, w)
	defer stop()

	var out []wfLatency
	measure := func(f func() (wfLatency, error)) error {
		redis0, proc0, t0 := b.redisCPU(ctx), processCPU(), time.Now()
		l, err := f()
		if err != nil {
			return err
		}
		el := time.Since(t0).Seconds()
		l.RedisCPU, l.ProcCPU = (b.redisCPU(ctx)-redis0)/el, (processCPU()-proc0)/el
		out = append(out, l)
		return nil
	}
	if run.chains > 0 {
		if err := measure(func() (wfLatency, error) { return b.chainHops(ctx, run.chains, run.chainLen) }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if run.rounds > 0 && run.deps > 0 {
		if err := measure(func() (wfLatency, error) { return b.joins(ctx, run.deps, run.rounds) }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	for _, l := range out {
		fmt.Printf("%-7s %-4s samples=%-5d deps=%-6d release p50=%6.1fms p99=%6.1fms max=%6.1fms  handler-to-handler p50=%6.1fms p99=%6.1fms max=%6.1fms  cpu/s redis=%.2f process=%.2f (%.0fs) %s\n",
			l.Backend, l.Kind, l.Samples, l.Deps, l.P50ms, l.P99ms, l.MaxMs, l.HP50ms, l.HP99ms, l.HMaxMs, l.RedisCPU, l.ProcCPU, l.Seconds, l.Note)
	}
	for _, l := range out {
		js, _ := json.Marshal(l)
		fmt.Println(string(js))
	}
	return 0
}

// queuesOnMasters returns three queue names whose keys ({queue} hash tag)
// three different masters serve.
func queuesOnMasters(ctx context.Context, c *redistest.Cluster, keys rdb.Keys) ([]string, error) {
	byMaster := map[string]string{}
	var out []string
	for i := 0; len(out) < 3 && i < 1000; i++ {
		q := fmt.Sprintf("w%d", i)
		m, err := c.MasterOf(ctx, keys.Depth(q))
		if err != nil {
			return nil, err
		}
		if _, ok := byMaster[m.Addr]; !ok {
			byMaster[m.Addr] = q
			out = append(out, q)
		}
	}
	if len(out) < 3 {
		return nil, fmt.Errorf("found queues on %d masters only", len(out))
	}
	return out, nil
}

// stamp is a handler that records when it started and when it returned.
func (b *wfBench) stamp() dtq.HandlerFunc {
	return func(ctx context.Context, t *dtq.Task) (any, error) {
		now := time.Now().UnixNano()
		b.mu.Lock()
		b.started[t.ID] = now
		b.mu.Unlock()
		b.mu.Lock()
		b.returned[t.ID] = time.Now().UnixNano()
		b.mu.Unlock()
		return nil, nil
	}
}

// node is a bench node of type typ on queue.
func node(ref, queue, typ string, deps ...string) dtq.Node {
	return dtq.Node{Ref: ref, Deps: deps, Submission: dtq.Submission{Queue: queue, Type: typ, MaxAttempts: 1}}
}

// waitEnded polls the workflow's status field (one HGET: reading the whole
// graph of a 10,001-node workflow while it runs would load Redis during
// the measurement) until it ended.
func (b *wfBench) waitEnded(ctx context.Context, id string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := b.rc.HGet(ctx, b.keys.Workflow(id), "status").Result()
		if err != nil && err != redis.Nil {
			return err
		}
		switch st {
		case "succeeded":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("workflow %s ended %s", id, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("workflow %s did not end within 5 minutes", id)
}

// taskEvents reads the events of queue's stream from sinceMs on and
// returns, per task id, the Redis time (ms, from the entry id) of its
// event of type typ.
func (b *wfBench) taskEvents(ctx context.Context, queue string, sinceMs int64, typ string) (map[string]int64, error) {
	out := map[string]int64{}
	start := strconv.FormatInt(sinceMs, 10)
	for {
		msgs, err := b.rc.XRangeN(ctx, b.keys.Events(queue), start, "+", 10_000).Result()
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Values["type"] != typ {
				continue
			}
			ms, _, _ := strings.Cut(m.ID, "-")
			v, _ := strconv.ParseInt(ms, 10, 64)
			out[m.Values["task_id"].(string)] = v
		}
		if len(msgs) < 10_000 {
			return out, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// ends reads, over every queue, the Redis time of each task's
// TASK_SUCCEEDED and TASK_QUEUED events since sinceMs.
func (b *wfBench) ends(ctx context.Context, sinceMs int64) (succeeded, queued map[string]int64, err error) {
	succeeded, queued = map[string]int64{}, map[string]int64{}
	for _, q := range b.queues {
		s, err := b.taskEvents(ctx, q, sinceMs, "TASK_SUCCEEDED")
		if err != nil {
			return nil, nil, err
		}
		qd, err := b.taskEvents(ctx, q, sinceMs, "TASK_QUEUED")
		if err != nil {
			return nil, nil, err
		}
		for k, v := range s {
			succeeded[k] = v
		}
		for k, v := range qd {
			queued[k] = v
		}
	}
	return succeeded, queued, nil
}

// joins runs rounds workflows, one at a time, of deps leaves spread over
// the queues and one join on queues[0] depending on all of them, and
// measures each join's release: from its last dep's end (the latest
// TASK_SUCCEEDED entry of its leaves) to its TASK_QUEUED entry, both on
// Redis's clock; and from the last leaf handler's return to the join
// handler's start, on the process's clock.
func (b *wfBench) joins(ctx context.Context, deps, rounds int) (wfLatency, error) {
	var rel, hand []float64
	began := time.Now()
	for r := range rounds {
		nodes := make([]dtq.Node, 0, deps+1)
		refs := make([]string, deps)
		for i := range deps {
			refs[i] = "l" + strconv.Itoa(i)
			nodes = append(nodes, node(refs[i], b.queues[i%len(b.queues)], "leaf"))
		}
		nodes = append(nodes, node("join", b.queues[0], "join", refs...))
		since := time.Now().UnixMilli() - 1
		stopTrace := b.traceBacklog(ctx)
		res, err := b.client.SubmitWorkflow(ctx, dtq.Workflow{Name: fmt.Sprintf("join-%d", r), Nodes: nodes})
		if err != nil {
			return wfLatency{}, err
		}
		joinID := res.Nodes[deps].TaskID
		if err := b.waitJoin(ctx, joinID); err != nil {
			return wfLatency{}, err
		}
		backlog := stopTrace()
		if err := b.waitEnded(ctx, res.WorkflowID); err != nil {
			return wfLatency{}, err
		}
		succ, queued, err := b.ends(ctx, since)
		if err != nil {
			return wfLatency{}, err
		}
		var lastEnd, lastReturn int64
		b.mu.Lock()
		for _, n := range res.Nodes[:deps] {
			e, ok := succ[n.TaskID]
			if !ok {
				b.mu.Unlock()
				return wfLatency{}, fmt.Errorf("no TASK_SUCCEEDED event for leaf %s (%s)", n.Ref, n.TaskID)
			}
			lastEnd = max(lastEnd, e)
			lastReturn = max(lastReturn, b.returned[n.TaskID])
		}
		joinStart := b.started[joinID]
		b.mu.Unlock()
		q, ok := queued[joinID]
		if !ok {
			return wfLatency{}, fmt.Errorf("no TASK_QUEUED event for the join %s", joinID)
		}
		rel = append(rel, float64(q-lastEnd))
		hand = append(hand, float64(joinStart-lastReturn)/1e6)
		if b.trace {
			b.printTrace(ctx, r, lastEnd, q, backlog, succ, res.Nodes[:deps])
		}
		b.forget()
	}
	l := summarize("join", b.backend, rel, hand)
	l.Deps, l.Seconds = deps, time.Since(began).Seconds()
	l.Note = fmt.Sprintf("%d rounds, one workflow at a time, leaves on %d queues", rounds, len(b.queues))
	return l, nil
}

// waitJoin waits until the join task id's handler ran (a map read every
// 2 ms, in the process: nothing extra reaches Redis).
func (b *wfBench) waitJoin(ctx context.Context, id string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		_, ok := b.started[id]
		b.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return fmt.Errorf("join %s did not run within 5 minutes", id)
}

// forget drops the handler stamps of a finished round.
func (b *wfBench) forget() {
	b.mu.Lock()
	clear(b.started)
	clear(b.returned)
	b.mu.Unlock()
}

// chainHops runs chains workflows, one at a time, each a chain of n nodes
// alternating over the queues, and
// measures each hop: from a node's TASK_SUCCEEDED entry to its dependant's
// TASK_QUEUED entry (Redis's clock), and from its handler's return to its
// dependant handler's start (the process's clock).
func (b *wfBench) chainHops(ctx context.Context, chains, n int) (wfLatency, error) {
	var rel, hand []float64
	began := time.Now()
	for c := range chains {
		nodes := make([]dtq.Node, n)
		for i := range n {
			var deps []string
			if i > 0 {
				deps = []string{"c" + strconv.Itoa(i-1)}
			}
			nodes[i] = node("c"+strconv.Itoa(i), b.queues[i%len(b.queues)], "leaf", deps...)
		}
		since := time.Now().UnixMilli() - 1
		res, err := b.client.SubmitWorkflow(ctx, dtq.Workflow{Name: fmt.Sprintf("chain-%d", c), Nodes: nodes})
		if err != nil {
			return wfLatency{}, err
		}
		if err := b.waitJoin(ctx, res.Nodes[n-1].TaskID); err != nil {
			return wfLatency{}, err
		}
		if err := b.waitEnded(ctx, res.WorkflowID); err != nil {
			return wfLatency{}, err
		}
		succ, queued, err := b.ends(ctx, since)
		if err != nil {
			return wfLatency{}, err
		}
		b.mu.Lock()
		for i := 1; i < n; i++ {
			dep, next := res.Nodes[i-1].TaskID, res.Nodes[i].TaskID
			e, ok1 := succ[dep]
			q, ok2 := queued[next]
			if !ok1 || !ok2 {
				b.mu.Unlock()
				return wfLatency{}, fmt.Errorf("chain %s: events missing for hop %d", res.WorkflowID, i)
			}
			rel = append(rel, float64(q-e))
			hand = append(hand, float64(b.started[next]-b.returned[dep])/1e6)
		}
		b.mu.Unlock()
		b.forget()
	}
	l := summarize("hop", b.backend, rel, hand)
	l.Seconds = time.Since(began).Seconds()
	l.Note = fmt.Sprintf("%d chains of %d nodes, one at a time, hops alternate over %d queues", chains, n, len(b.queues))
	return l, nil
}

// summarize gives the nearest-rank p50, p99 and max of both measures.
func summarize(kind, backend string, rel, hand []float64) wfLatency {
	slices.Sort(rel)
	slices.Sort(hand)
	p := func(v []float64, q float64) float64 {
		if len(v) == 0 {
			return 0
		}
		return v[max(0, int(math.Ceil(q*float64(len(v))))-1)]
	}
	return wfLatency{Kind: kind, Backend: backend, Samples: len(rel),
		P50ms: p(rel, 0.5), P99ms: p(rel, 0.99), MaxMs: p(rel, 1),
		HP50ms: p(hand, 0.5), HP99ms: p(hand, 0.99), HMaxMs: p(hand, 1)}
}

// backlogSample is the workflow outboxes' total length at a moment.
type backlogSample struct {
	ms    int64
	n     int64
	queue []int64 // per queue, in b.queues' order
}

// traceBacklog samples the outboxes' lengths every 5 ms (with -trace)
// until the returned function is called, which answers the samples.
func (b *wfBench) traceBacklog(ctx context.Context) func() []backlogSample {
	if !b.trace {
		return func() []backlogSample { return nil }
	}
	var out []backlogSample
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			s := backlogSample{queue: make([]int64, len(b.queues))}
			for i, q := range b.queues {
				s.queue[i] = b.rc.XLen(ctx, b.keys.WorkflowOutbox(q)).Val()
				s.n += s.queue[i]
			}
			s.ms = time.Now().UnixMilli()
			out = append(out, s)
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() []backlogSample { close(done); <-stopped; return out }
}

// printTrace prints where a join's release time went (-trace): the
// outboxes' backlog (entries not yet relayed) when the last leaf ended and
// on the way there, the leaves' end rate, and the scripts slower than
// 10 ms in the slow logs.
func (b *wfBench) printTrace(ctx context.Context, round int, lastEnd, queued int64, backlog []backlogSample,
	succ map[string]int64, leaves []dtq.NodeRef) {
	first := lastEnd
	for _, n := range leaves {
		first = min(first, succ[n.TaskID])
	}
	var atEnd, peak int64
	var perQueue []int64
	for _, s := range backlog {
		if s.ms <= lastEnd {
			atEnd, perQueue = s.n, s.queue
		}
		peak = max(peak, s.n)
	}
	var timeline []string
	next := first
	for _, s := range backlog {
		if s.ms >= next && s.ms <= lastEnd {
			timeline = append(timeline, strconv.FormatInt(s.n, 10))
			next = s.ms + 500
		}
	}
	rate := float64(len(leaves)) / max(0.001, float64(lastEnd-first)/1000)
	fmt.Printf("round %d: leaves ended over %d ms (%.0f/s); outbox backlog at the last end %d %v (peak %d); join queued %d ms later\n",
		round, lastEnd-first, rate, atEnd, perQueue, peak, queued-lastEnd)
	fmt.Printf("  outbox backlog every 500 ms from the first leaf's end: %s\n", strings.Join(timeline, " "))
	var slow []string
	forEachMaster(ctx, b.rc, func(rc *redis.Client) {
		for _, e := range rc.SlowLogGet(ctx, 128).Val() {
			if len(e.Args) > 3 && strings.EqualFold(e.Args[0], "evalsha") {
				slow = append(slow, fmt.Sprintf("%s %.1fms", scriptName(e.Args[1]), float64(e.Duration.Microseconds())/1000))
			}
		}
		rc.SlowLogReset(ctx)
	})
	if len(slow) > 0 {
		fmt.Printf("  slow commands: %s\n", strings.Join(slow, ", "))
	}
}

// forEachMaster calls f with a client of each master (the server itself
// when rc is not a cluster client).
func forEachMaster(ctx context.Context, rc redis.UniversalClient, f func(*redis.Client)) {
	if cc, ok := rc.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { f(c); return nil })
		return
	}
	f(rc.(*redis.Client))
}

// scriptNames are the workflow scripts and the hot task scripts by hash.
var scriptNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{"wf_create", "wf_nodes", "wf_start", "wf_apply", "wf_release", "wf_released", "wf_mark",
		"wf_unmark", "wf_ack", "wf_lock", "claim", "finish_succeeded", "ingest"} {
		m[rdb.ScriptHash(n)] = n
	}
	return m
}()

// scriptName names a script by its hash (the hash itself when unknown).
func scriptName(sha string) string {
	if n, ok := scriptNames[sha]; ok {
		return n
	}
	return sha
}

// redisCPU is the CPU seconds (user and system) every master has spent.
func (b *wfBench) redisCPU(ctx context.Context) float64 {
	var mu sync.Mutex
	var total float64
	forEachMaster(ctx, b.rc, func(rc *redis.Client) {
		s := readStats(ctx, rc)
		mu.Lock()
		total += s.cpuSec
		mu.Unlock()
	})
	return total
}

// processCPU is the CPU seconds (user and system) this process has spent.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
