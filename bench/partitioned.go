package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// partitionedRun is the partitioned scenario's settings.
type partitionedRun struct {
	masters     int
	rate        int           // tasks per second offered to each queue
	warmup      time.Duration // before the measured window
	duration    time.Duration // the measured window
	keys        int           // concurrency keys, drawn uniformly
	producers   int           // paced goroutines calling Submit
	concurrency int           // the worker's handler slots
	listpack    int           // hash-max-listpack-value
}

// phase is what one queue's run measured: tasks submitted and done, and
// each master's Redis CPU seconds, within the measured window.
type phase struct {
	queue      string
	partitions int
	perMaster  map[string]int // partitions per master
	submitted  int64
	done       int64
	seconds    float64
	cpu        map[string]float64 // master address -> CPU seconds
	cmds       map[string]cmdStat // command -> calls and µs, summed over masters
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  int64
}

func (p phase) totalCPU() float64 {
	var t float64
	for _, v := range p.cpu {
		t += v
	}
	return t
}

// busiest is the largest CPU seconds any master spent.
func (p phase) busiest() float64 {
	var b float64
	for _, v := range p.cpu {
		b = max(b, v)
	}
	return b
}

// partitionedBench runs, on one Redis Cluster of r.masters masters, a
// queue of one partition and then a queue of 2·masters partitions at the
// same offered rate, and prints each master's share of the Redis CPU, the
// Redis CPU per task, and how many tasks a second the busiest master's CPU
// carries: what decides how far one queue scales with the masters, which a
// machine of few cores cannot show as throughput (docs/benchmarks.md).
func partitionedBench(r partitionedRun) int {
	if r.masters < 3 || r.rate < 1 || r.producers < 1 || r.keys < 1 || r.concurrency < 1 || r.duration <= 0 {
		fmt.Fprintln(os.Stderr, "partitioned: -masters must be at least 3 (a Redis Cluster's least), -rate, -producers, -keys, -concurrency and -duration positive")
		return 2
	}
	ctx := context.Background()
	c, err := redistest.StartCluster(r.masters, 0, "--hash-max-listpack-value", strconv.Itoa(r.listpack))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Stop()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 256})
	defer cc.Close()
	fmt.Printf("%s\npartitioned: %d masters, %d tasks/s offered to each queue, %s warm-up then %s measured, "+
		"%d concurrency keys (uniform), %d producers (Submit), worker concurrency %d, GOMAXPROCS %d\n",
		strings.Join(os.Args, " "), r.masters, r.rate, r.warmup, r.duration, r.keys, r.producers, r.concurrency, runtime.GOMAXPROCS(0))
	var phases []phase
	for _, q := range []struct {
		name       string
		partitions int
	}{{"single", 1}, {"hot", 2 * r.masters}} {
		p, err := runPhase(ctx, c, cc, r, q.name, q.partitions)
		if err != nil {
			fmt.Fprintf(os.Stderr, "partitioned: queue %s (P=%d): %v\n", q.name, q.partitions, err)
			return 1
		}
		phases = append(phases, p)
	}
	printPartitioned(r, phases)
	return 0
}

// runPhase creates queue with partitions, serves it with one worker, offers
// it r.rate tasks a second from paced producers, and measures the window
// after the warm-up. It then stops the producers and waits until every
// task submitted has run: a task lost or stuck fails the run.
func runPhase(ctx context.Context, c *redistest.Cluster, cc *redis.ClusterClient, r partitionedRun, queue string, partitions int) (phase, error) {
	d := open(cc, nil)
	admin, err := d.NewAdmin(nil)
	if err != nil {
		return phase{}, err
	}
	if _, err := admin.CreateQueue(ctx, queue, &dtq.QueueOptions{Partitions: partitions}); err != nil {
		return phase{}, err
	}
	per, err := placement(ctx, c, cc, queue)
	if err != nil {
		return phase{}, err
	}
	client, err := d.NewClient(&dtq.ClientConfig{MaxQueueDepth: 10_000_000, SubmitLinger: submitLinger})
	if err != nil {
		return phase{}, err
	}
	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{queue: 1}, Concurrency: r.concurrency,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return phase{}, err
	}
	var done atomic.Int64
	w.HandleFunc("noop", func(context.Context, *dtq.Task) (any, error) { done.Add(1); return nil, nil })
	stopWorker := runWorker(ctx, w)
	defer stopWorker()

	var submitted atomic.Int64
	var firstErr atomic.Pointer[error]
	pctx, stopProducers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Each producer keeps its own schedule, rate/producers a second,
	// staggered; one that falls behind submits at once until it catches up.
	interval := time.Duration(float64(time.Second) * float64(r.producers) / float64(r.rate))
	start := time.Now()
	for g := range r.producers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g)+1, uint64(partitions)+1)) // #nosec G115 -- small, positive
			due := start.Add(interval * time.Duration(g) / time.Duration(r.producers))
			for {
				if s := time.Until(due); s > 0 {
					select {
					case <-pctx.Done():
						return
					case <-time.After(s):
					}
				} else if pctx.Err() != nil {
					return
				}
				due = due.Add(interval)
				_, err := client.Submit(ctx, dtq.Submission{Queue: queue, Type: "noop",
					ConcurrencyKey: "k" + strconv.Itoa(rng.IntN(r.keys))})
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				submitted.Add(1)
			}
		})
	}
	time.Sleep(r.warmup)
	cpu0, cmds0 := masterCPU(ctx, c), commandStats(ctx, c)
	sub0, done0, t0 := submitted.Load(), done.Load(), time.Now()
	var calls map[string]int64
	var monitored time.Duration
	if os.Getenv("DTQ_BENCH_MONITOR") != "" {
		time.Sleep(r.duration / 4)
		monitored = min(2*time.Second, r.duration/2)
		calls = monitorCalls(ctx, c, monitored)
		time.Sleep(r.duration - r.duration/4 - monitored)
	} else {
		time.Sleep(r.duration)
	}
	cpu1, cmds1 := masterCPU(ctx, c), commandStats(ctx, c)
	sub1, done1, el := submitted.Load(), done.Load(), time.Since(t0)
	stopProducers()
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return phase{}, fmt.Errorf("submit: %w", *e)
	}
	// Every task submitted runs: none lost, none stuck in a partition.
	total := submitted.Load()
	deadline := time.Now().Add(30 * time.Second)
	for done.Load() < total && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := done.Load(); got != total {
		return phase{}, fmt.Errorf("%d tasks submitted, %d ran within 30 s of the last submit", total, got)
	}
	qi, err := d.Inspector().GetQueue(ctx, queue)
	for err == nil && qi.Depth != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the last finalizes may still be in flight
		qi, err = d.Inspector().GetQueue(ctx, queue)
	}
	if err != nil {
		return phase{}, err
	}
	if qi.Depth != 0 {
		return phase{}, fmt.Errorf("all %d tasks ran, yet the queue's depth is %d", total, qi.Depth)
	}
	p := phase{queue: queue, partitions: partitions, perMaster: per, submitted: sub1 - sub0, done: done1 - done0,
		seconds: el.Seconds(), cpu: map[string]float64{}, cmds: map[string]cmdStat{}}
	for a := range cpu1 {
		p.cpu[a] = cpu1[a] - cpu0[a]
	}
	for k, v := range cmds1 {
		p.cmds[k] = cmdStat{calls: v.calls - cmds0[k].calls, usec: v.usec - cmds0[k].usec}
	}
	if calls != nil {
		printCalls(queue, calls, float64(p.done)/p.seconds*monitored.Seconds())
	}
	return p, nil
}

// monitorCalls counts, for d, the commands every master is sent (MONITOR),
// scripts by name: with DTQ_BENCH_MONITOR, to see which calls a task costs.
func monitorCalls(ctx context.Context, c *redistest.Cluster, d time.Duration) map[string]int64 {
	names := map[string]string{}
	files, _ := filepath.Glob("../internal/rdb/lua/*.lua")
	for _, f := range files {
		n := strings.TrimSuffix(filepath.Base(f), ".lua")
		if h := rdb.ScriptHash(n); h != "" {
			names[h] = n
		}
	}
	out := map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range c.Masters(ctx) {
		wg.Go(func() {
			conn, err := net.Dial("tcp", s.Addr)
			if err != nil {
				return
			}
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(d))
			if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
				return
			}
			rd := bufio.NewReader(conn)
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					return // the deadline
				}
				f := strings.Fields(line)
				if len(f) < 4 {
					continue
				}
				cmd := strings.Trim(strings.ToLower(f[3]), `"`)
				if cmd == "evalsha" && len(f) > 4 {
					sha := strings.Trim(f[4], `"`)
					cmd = "script " + cmp.Or(names[sha], sha)
				}
				mu.Lock()
				out[cmd]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// printCalls prints the calls monitorCalls counted per task done while it
// watched (tasks, estimated from the window's rate).
func printCalls(queue string, calls map[string]int64, tasks float64) {
	names := make([]string, 0, len(calls))
	for k := range calls {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return calls[names[i]] > calls[names[j]] })
	var out []string
	for _, k := range names {
		if v := float64(calls[k]) / tasks; v >= 0.005 {
			out = append(out, fmt.Sprintf("%s %.3f", k, v))
		}
	}
	fmt.Printf("calls per task on %s (MONITOR): %s\n", queue, strings.Join(out, ", "))
}

// masterCPU reads every master's used_cpu_sys + used_cpu_user, in seconds.
func masterCPU(ctx context.Context, c *redistest.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, s := range c.Masters(ctx) {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr})
		out[s.Addr] = readStats(ctx, rc).cpuSec
		rc.Close()
	}
	return out
}

// commandStats sums INFO commandstats over the masters.
func commandStats(ctx context.Context, c *redistest.Cluster) map[string]cmdStat {
	out := map[string]cmdStat{}
	for _, s := range c.Masters(ctx) {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr})
		info := rc.Info(ctx, "commandstats").Val()
		rc.Close()
		for line := range strings.SplitSeq(info, "\r\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
			if !ok || !strings.HasPrefix(line, "cmdstat_") {
				continue
			}
			st := out[name]
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					st.calls += n
				case "usec":
					st.usec += n
				}
			}
			out[name] = st
		}
	}
	return out
}

// placement counts queue's partitions on each master.
func placement(ctx context.Context, c *redistest.Cluster, cc *redis.ClusterClient, queue string) (map[string]int, error) {
	parts, err := rdb.New(cc, "dtq").Partitions(ctx, queue, false)
	if err != nil {
		return nil, err
	}
	keys := rdb.NewKeys("dtq")
	out := map[string]int{}
	for _, s := range c.Masters(ctx) {
		out[s.Addr] = 0
	}
	for _, p := range parts {
		m, err := c.MasterOf(ctx, keys.Depth(p))
		if err != nil {
			return nil, err
		}
		out[m.Addr]++
	}
	if len(out) == 0 {
		return nil, errors.New("no masters")
	}
	return out, nil
}

// printPartitioned prints one row per queue, then the ratios against the
// goals: busiest master ≤ 1.15/M of the Redis CPU, CPU per task ≤ 1.15×
// the one-partition queue's, capacity ≥ 0.75·M times its.
func printPartitioned(r partitionedRun, ps []phase) {
	addrs := make([]string, 0, len(ps[0].cpu))
	for a := range ps[0].cpu {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	fmt.Printf("\n| queue | P | partitions per master | offered/s | submitted/s | done/s | Redis CPU share per master | busiest | Redis CPU µs/task (all masters) | tasks per busiest-master CPU-second |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|\n")
	capacity := make([]float64, len(ps))
	perTask := make([]float64, len(ps))
	for i, p := range ps {
		total := p.totalCPU()
		var shares, place []string
		for _, a := range addrs {
			shares = append(shares, fmt.Sprintf("%.0f%%", 100*p.cpu[a]/total))
			place = append(place, strconv.Itoa(p.perMaster[a]))
		}
		perTask[i] = total * 1e6 / float64(p.done)
		capacity[i] = float64(p.done) / p.busiest()
		fmt.Printf("| %s | %d | %s | %d | %.0f | %.0f | %s | %.1f%% | %.1f | %.0f |\n",
			p.queue, p.partitions, strings.Join(place, " / "), r.rate, float64(p.submitted)/p.seconds, float64(p.done)/p.seconds,
			strings.Join(shares, " / "), 100*p.busiest()/total, perTask[i], capacity[i])
	}
	// Where the Redis time went: the commands that took the most, per task.
	fmt.Printf("\nRedis calls per task (µs per task inside each command, as INFO commandstats counts it):\n")
	for _, p := range ps {
		names := make([]string, 0, len(p.cmds))
		for k := range p.cmds {
			names = append(names, k)
		}
		sort.Slice(names, func(i, j int) bool { return p.cmds[names[i]].usec > p.cmds[names[j]].usec })
		var top []string
		for _, k := range names[:min(8, len(names))] {
			top = append(top, fmt.Sprintf("%s %.2f (%.1f µs)", k, float64(p.cmds[k].calls)/float64(p.done), float64(p.cmds[k].usec)/float64(p.done)))
		}
		fmt.Printf("  %-6s %s\n", p.queue, strings.Join(top, ", "))
	}
	m := float64(r.masters)
	last := ps[len(ps)-1]
	busiest := last.busiest() / last.totalCPU()
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("\nM = %d, P = %d:\n", r.masters, last.partitions)
	fmt.Printf("  busiest master's share          %5.1f%%  goal ≤ %.1f%% (1.15/M)  %s\n", 100*busiest, 115/m, verdict(busiest <= 1.15/m))
	ratio := perTask[len(ps)-1] / perTask[0]
	fmt.Printf("  CPU per task, partitioned / P=1 %6.2f   goal ≤ 1.15          %s\n", ratio, verdict(ratio <= 1.15))
	capRatio := capacity[len(ps)-1] / capacity[0]
	fmt.Printf("  capacity ratio                  %6.2f   goal ≥ %.2f (0.75·M) %s\n", capRatio, 0.75*m, verdict(capRatio >= 0.75*m))
}
