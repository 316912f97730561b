// Command bench is dtq's load generator. It starts a private redis-server
// (so it never flushes anyone else's data), runs one scenario and prints a
// table line plus a JSON line with throughput, latency percentiles and Redis
// cost per task (commands, CPU, memory) read from INFO.
//
//	go run . -scenario enqueue -n 50000 -producers 16
//	go run . -scenario e2e -n 50000 -concurrency 32
//	go run . -scenario latency -rate 2000 -duration 10s
//	go run . -workflow-join 10000 -rounds 20 -chains 100 [-cluster]
//	go run . -scenario outbox -n 2000 -rate 200
//	go run . -scenario dedup -n 50000 -runs 3
//	go run . -scenario dedup -dedup-case drop-small -producers 1 -n 10000 [-idem]
//	go run . -scenario partitioned -masters 3 [-rate 2000 -duration 20s]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/redistest"
)

type result struct {
	System       string  `json:"system"`
	Scenario     string  `json:"scenario"`
	Tasks        int64   `json:"tasks"`
	Seconds      float64 `json:"seconds"`
	PerSecond    float64 `json:"tasks_per_second"`
	P50ms        float64 `json:"p50_ms,omitempty"`
	P99ms        float64 `json:"p99_ms,omitempty"`
	CmdsPerTask  float64 `json:"redis_commands_per_task"`
	CPUusPerTask float64 `json:"redis_cpu_us_per_task"`
	BytesPerTask float64 `json:"redis_bytes_per_task,omitempty"`
	Note         string  `json:"note,omitempty"`
}

func main() {
	scenario := flag.String("scenario", "e2e", "enqueue | batch | e2e | pc | latency | http | qstats | cluster-e2e | memory | outbox | fair-e2e | progress | dedup | partitioned")
	system := flag.String("system", "dtq", "dtq | asynq")
	poll := flag.Duration("asynq-poll", 0, "asynq TaskCheckInterval for the latency scenario (0 = asynq's default)")
	n := flag.Int("n", 50000, "tasks (enqueue, batch, e2e)")
	producers := flag.Int("producers", 16, "concurrent producers (enqueue; partitioned: paced, default 64)")
	conns := flag.Int("conns", 64, "keep-alive connections (http)")
	listpackValue := flag.Int("listpack-value", 1024, "redis-server hash-max-listpack-value (dtq's recommended 1024; Redis's default is 64)")
	concurrency := flag.Int("concurrency", 32, "worker concurrency (e2e, latency; partitioned: default 64)")
	rate := flag.Int("rate", 2000, "tasks per second (latency; partitioned: offered to each queue, default 2000)")
	duration := flag.Duration("duration", 10*time.Second, "run time (latency; partitioned: the measured window of each queue, default 20s)")
	masters := flag.Int("masters", 3, "Redis Cluster masters, at least 3 (partitioned)")
	warmup := flag.Duration("warmup", 5*time.Second, "partitioned: run time of each queue before its measured window")
	payloadSize := flag.Int("payload", 100, "payload bytes")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	replicas := flag.Int("replica-acks", 0, "attach this many replicas and make dtq's writes wait for them (DTQ_REPLICA_ACKS)")
	queues := flag.Int("queues", 3, "queues (cluster-e2e)")
	retention := flag.Duration("retention", -1, "succeeded retention (memory; -1 = the system's default, 0 = keep nothing)")
	idem := flag.Bool("idem", false, "an idempotency key per task, asynq: TaskID (enqueue, memory, dedup)")
	keys := flag.Int("keys", 100, "concurrency keys, round robin (fair-e2e; partitioned: drawn uniformly, default 10000)")
	fair := flag.Bool("fair", true, "set fairness on the queue (fair-e2e)")
	compareRuns := flag.Int("compare", 0, "run the dtq/asynq comparison, each case this many times (medians), and print the table")
	wfJoin := flag.Int("workflow-join", 0, "workflow release latency: joins of this many deps (see -rounds, -chains, -cluster)")
	wfRounds := flag.Int("rounds", 20, "workflow joins to run, one at a time (-workflow-join)")
	wfChains := flag.Int("chains", 0, "workflow release latency: chains to run, one at a time, for the hop latency (-chain-len)")
	wfChainLen := flag.Int("chain-len", 6, "nodes per chain (-chains)")
	wfCluster := flag.Bool("cluster", false, "run the workflow latency scenarios on a 3-master Redis Cluster")
	wfTrace := flag.Bool("trace", false, "workflow joins: print each round's outbox backlog and the scripts slower than 10 ms")
	linger := flag.Duration("submit-linger", 0, "dtq: ClientConfig.SubmitLinger (0 = the default; negative = never wait)")
	events := flag.String("events", "", `dtq: set the queue's event detail first, "full" or "outcomes" ("" = leave the default)`)
	dedupCaseName := flag.String("dedup-case", "", "dedup: run only this case (none | drop-distinct | drop-small | debounce-small | replace-small) with -producers and -idem; \"\" = the whole table")
	dedupKeys := flag.Int("dedup-keys", 100, "dedup: the keys of the small key space")
	runs := flag.Int("runs", 3, "dedup: runs of each combination for the table's medians")
	flag.Parse()
	if *compareRuns > 0 {
		os.Exit(compare(*compareRuns, *n))
	}
	if *scenario == "dedup" && *dedupCaseName == "" {
		os.Exit(dedupTable(max(1, *runs), *n, *dedupKeys))
	}
	if *scenario == "dedup" {
		if err := checkDedupFlags(*dedupCaseName, *n, *dedupKeys); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	submitLinger = *linger
	if *scenario == "partitioned" {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		r := partitionedRun{masters: *masters, rate: 2000, warmup: *warmup, duration: 20 * time.Second, keys: 10_000,
			producers: 64, concurrency: 64, listpack: *listpackValue}
		// Flags set on the command line replace the scenario's defaults.
		for name, v := range map[string][2]*int{"rate": {&r.rate, rate}, "keys": {&r.keys, keys},
			"producers": {&r.producers, producers}, "concurrency": {&r.concurrency, concurrency}} {
			if set[name] {
				*v[0] = *v[1]
			}
		}
		if set["duration"] {
			r.duration = *duration
		}
		os.Exit(partitionedBench(r))
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *wfJoin > 0 || *wfChains > 0 {
		code := workflowLatency(context.Background(), wfRun{deps: *wfJoin, rounds: *wfRounds, chains: *wfChains,
			chainLen: max(2, *wfChainLen), concurrency: *concurrency, cluster: *wfCluster, trace: *wfTrace})
		pprof.StopCPUProfile()
		os.Exit(code)
	}

	srv, err := redistest.Start("--hash-max-listpack-value", strconv.Itoa(*listpackValue))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer srv.Stop()
	if *replicas > 0 {
		stopReplicas := startReplicas(srv.Addr, *replicas)
		defer stopReplicas()
		replicaAcks = *replicas
	}
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 256})
	defer rc.Close()
	ctx := context.Background()

	if *events != "" && *system == "dtq" {
		if err := setEvents(ctx, rc, "default", *events); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	payload := map[string]string{"data": strings.Repeat("x", max(0, *payloadSize-12))}
	var res result
	payloadBytes, _ := json.Marshal(payload)
	if *system == "asynq" {
		switch *scenario {
		case "enqueue":
			res = asynqEnqueue(ctx, rc, srv.Addr, *n, *producers, payloadBytes, *idem)
		case "pc":
			res = asynqProduceConsume(ctx, rc, srv.Addr, *n, *producers, *concurrency, payloadBytes)
		case "e2e":
			res = asynqE2E(ctx, rc, srv.Addr, *n, *concurrency, payloadBytes)
		case "latency":
			res = asynqLatency(ctx, rc, srv.Addr, *rate, *duration, *concurrency, *poll)
		case "memory":
			res = asynqMemory(ctx, rc, srv.Addr, *n, payloadBytes, memoryRun{retention: *retention, idem: *idem})
		default:
			fmt.Fprintln(os.Stderr, "scenario not available for asynq:", *scenario)
			os.Exit(2)
		}
	} else {
		switch *scenario {
		case "enqueue":
			res = enqueue(ctx, rc, *n, *producers, payload, *idem)
		case "pc":
			res = produceConsume(ctx, rc, *n, *producers, *concurrency, payload)
		case "batch":
			res = batch(ctx, rc, *n, payload)
		case "e2e":
			res = e2e(ctx, rc, *n, *concurrency, payload)
		case "latency":
			res = latency(ctx, rc, *rate, *duration, *concurrency)
		case "http":
			res = httpSubmit(ctx, rc, *n, *conns)
		case "cluster-e2e":
			res = clusterE2E(ctx, *n, *concurrency, *queues, payload)
		case "qstats":
			res = queueStats(ctx, rc, *n, payload)
		case "memory":
			res = memory(ctx, rc, *n, payload, memoryRun{retention: *retention, idem: *idem})
		case "outbox":
			res = outboxBench(ctx, rc, *n, *rate)
		case "fair-e2e":
			res = fairE2E(ctx, rc, *n, *concurrency, *keys, *fair, payload)
		case "progress":
			res = progressBench(ctx, rc, *n, *concurrency)
		case "dedup":
			res = dedupBench(ctx, rc, *dedupCaseName, *n, *producers, *dedupKeys, *idem, payload)
		default:
			fmt.Fprintln(os.Stderr, "unknown scenario", *scenario)
			os.Exit(2)
		}
	}
	pprof.StopCPUProfile()
	res.System = *system
	res.Scenario = *scenario
	if *events != "" {
		res.Note = strings.TrimSpace(res.Note + " events=" + *events)
	}
	fmt.Printf("%-6s %-8s tasks=%-7d %9.0f tasks/s  p50=%6.2fms p99=%6.2fms  cmds/task=%5.1f  cpu/task=%6.1fµs  bytes/task=%6.0f %s\n",
		res.System, res.Scenario, res.Tasks, res.PerSecond, res.P50ms, res.P99ms, res.CmdsPerTask, res.CPUusPerTask, res.BytesPerTask, res.Note)
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

// redisStats are the INFO counters a run is charged with.
type redisStats struct {
	calls  int64
	cpuSec float64
	memory int64
}

func readStats(ctx context.Context, rc *redis.Client) redisStats {
	var s redisStats
	info := rc.Info(ctx, "commandstats", "cpu", "memory").Val()
	for _, line := range strings.Split(info, "\r\n") {
		switch {
		case strings.HasPrefix(line, "cmdstat_"):
			// cmdstat_xadd:calls=10,usec=...
			_, rest, _ := strings.Cut(line, ":")
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "calls="); ok {
					c, _ := strconv.ParseInt(v, 10, 64)
					// Scripts are counted twice (EVALSHA plus the commands inside); count only the inside.
					if !strings.HasPrefix(line, "cmdstat_evalsha") && !strings.HasPrefix(line, "cmdstat_eval:") &&
						!strings.HasPrefix(line, "cmdstat_info") {
						s.calls += c
					}
				}
			}
		case strings.HasPrefix(line, "used_cpu_sys:"), strings.HasPrefix(line, "used_cpu_user:"):
			_, v, _ := strings.Cut(line, ":")
			f, _ := strconv.ParseFloat(v, 64)
			s.cpuSec += f
		case strings.HasPrefix(line, "used_memory:"):
			_, v, _ := strings.Cut(line, ":")
			s.memory, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return s
}

func charge(r *result, before, after redisStats, tasks int64) {
	r.CmdsPerTask = float64(after.calls-before.calls) / float64(tasks)
	r.CPUusPerTask = (after.cpuSec - before.cpuSec) * 1e6 / float64(tasks)
}

// replicaAcks is -replica-acks: the replicas dtq's writes wait for.
var replicaAcks int

// submitLinger is -submit-linger, the clients' ClientConfig.SubmitLinger.
var submitLinger time.Duration

// open returns the deployment on rc (key prefix "dtq") with -replica-acks
// and the settings that change sets (nil: none).
func open(rc redis.UniversalClient, change func(*dtq.DeploymentConfig)) *dtq.Deployment {
	cfg := &dtq.DeploymentConfig{ReplicaAcks: replicaAcks}
	if change != nil {
		change(cfg)
	}
	d, err := dtq.Open(rc, cfg)
	if err != nil {
		panic(err)
	}
	return d
}

func newClient(rc *redis.Client) *dtq.Client {
	c, err := open(rc, nil).NewClient(&dtq.ClientConfig{MaxQueueDepth: 10_000_000, SubmitLinger: submitLinger})
	if err != nil {
		panic(err)
	}
	return c
}

// enqueue submits n tasks from producers goroutines, each with its own
// idempotency key when idem is set. Bytes per task count everything the
// queued tasks cost, the event stream included.
func enqueue(ctx context.Context, rc *redis.Client, n, producers int, payload any, idem bool) result {
	c := newClient(rc)
	_, _ = c.Submit(ctx, dtq.Submission{Type: "warmup", Payload: payload}) // register the queue
	return measureEnqueue(ctx, rc, n, producers, fmt.Sprintf("producers=%d idempotency=%t", producers, idem),
		func(i int64) error {
			s := dtq.Submission{Type: "noop", Payload: payload}
			if idem {
				s.IdempotencyKey = "order-" + strconv.FormatInt(i, 10)
			}
			_, err := c.Submit(ctx, s)
			return err
		})
}

// measureEnqueue times n calls of submit (i = 1..n) spread over producers
// goroutines, for dtq and asynq alike, and charges Redis's commands, CPU
// and memory to them. With DTQ_BENCH_CALLGRIND it zeroes and dumps the
// callgrind counts around the measured phase.
func measureEnqueue(ctx context.Context, rc *redis.Client, n, producers int, note string, submit func(i int64) error) result {
	before := readStats(ctx, rc)
	callgrind("-z")
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := submit(i); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	callgrind("-d", "enqueue")
	after := readStats(ctx, rc)
	dumpCommandStats(ctx, rc)
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(), Note: note}
	charge(&r, before, after, int64(n))
	r.BytesPerTask = float64(after.memory-before.memory) / float64(n)
	return r
}

// runWorker starts w in the background; stop cancels it and waits until
// Run has returned.
func runWorker(ctx context.Context, w *dtq.Worker) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = w.Run(wctx); close(done) }()
	return func() { cancel(); <-done }
}

// produceConsume runs producers and a worker at once: n tasks submitted by
// producers goroutines while the worker runs them, timed from the first
// submission to the last completion.
func produceConsume(ctx context.Context, rc *redis.Client, n, producers, concurrency int, payload any) result {
	c := newClient(rc)
	w := newWorker(rc, concurrency)
	tick, allDone := countdown(n)
	w.HandleFunc("noop", func(ctx context.Context, t *dtq.Task) (any, error) { tick(); return nil, nil })
	w.HandleFunc("warmup", func(ctx context.Context, t *dtq.Task) (any, error) { return nil, nil })
	stop := runWorker(ctx, w)
	_, _ = c.Submit(ctx, dtq.Submission{Type: "warmup"}) // register the queue
	waitDrained(ctx, rc)
	before := readStats(ctx, rc)
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := c.Submit(ctx, dtq.Submission{Type: "noop", Payload: payload}); err != nil {
					panic(err)
				}
			}
		})
	}
	<-allDone
	wg.Wait()
	waitDrained(ctx, rc)
	el := time.Since(start)
	after := readStats(ctx, rc)
	dumpCommandStats(ctx, rc)
	stop()
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(),
		Note: fmt.Sprintf("producers=%d concurrency=%d, first submit to last completion", producers, concurrency)}
	charge(&r, before, after, int64(n))
	return r
}

// countdown returns tick, which counts calls, and a channel closed at the
// n-th: a benchmark's "every task ran".
func countdown(n int) (tick func(), done <-chan struct{}) {
	var count atomic.Int64
	ch := make(chan struct{})
	return func() {
		if count.Add(1) == int64(n) {
			close(ch)
		}
	}, ch
}

// callgrind runs callgrind_control with args when DTQ_BENCH_CALLGRIND is
// set: bench/scriptcost.sh runs the enqueue scenario against a redis-server
// under callgrind, zeroes the counts when the measured phase starts ("-z")
// and dumps them when it ends ("-d", "enqueue").
func callgrind(args ...string) {
	if os.Getenv("DTQ_BENCH_CALLGRIND") == "" {
		return
	}
	if out, err := exec.Command("callgrind_control", args...).CombinedOutput(); err != nil {
		panic(fmt.Sprintf("callgrind_control %v: %v: %s", args, err, out))
	}
}

// dumpCommandStats prints Redis's per-command statistics to stderr when
// DTQ_BENCH_CMDSTATS is set, to see where the Redis CPU of a run went.
func dumpCommandStats(ctx context.Context, rc *redis.Client) {
	if os.Getenv("DTQ_BENCH_CMDSTATS") != "" {
		fmt.Fprintln(os.Stderr, rc.Info(ctx, "commandstats").Val())
	}
}

// eventsMemory is what the capped event streams hold: excluded from the
// bytes-per-task figure, since their size is set by DTQ_EVENTS_MAXLEN.
func eventsMemory(ctx context.Context, rc *redis.Client) int64 {
	var total int64
	iter := rc.Scan(ctx, 0, "dtq:events:*", 100).Iterator()
	for iter.Next(ctx) {
		total += rc.MemoryUsage(ctx, iter.Val(), 0).Val()
	}
	return total
}

func batch(ctx context.Context, rc *redis.Client, n int, payload any) result {
	c := newClient(rc)
	before := readStats(ctx, rc)
	start := time.Now()
	for done := 0; done < n; done += 1000 {
		subs := make([]dtq.Submission, min(1000, n-done))
		for i := range subs {
			subs[i] = dtq.Submission{Type: "noop", Payload: payload}
		}
		items, err := c.SubmitBatch(ctx, subs)
		if err != nil || items[0].Err != nil {
			panic(fmt.Sprint(err, items[0].Err))
		}
	}
	el := time.Since(start)
	after := readStats(ctx, rc)
	dumpCommandStats(ctx, rc)
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(), Note: "SubmitBatch of 1000"}
	charge(&r, before, after, int64(n))
	r.BytesPerTask = float64(after.memory-before.memory-eventsMemory(ctx, rc)) / float64(n)
	return r
}

func newWorker(rc *redis.Client, concurrency int) *dtq.Worker {
	return newWorkerWith(rc, concurrency, nil, nil)
}

// newWorkerWith is newWorker with changes to its deployment's settings
// and its configuration.
func newWorkerWith(rc *redis.Client, concurrency int, deploy func(*dtq.DeploymentConfig), change func(*dtq.WorkerConfig)) *dtq.Worker {
	conf := &dtq.WorkerConfig{Concurrency: concurrency, Logger: slog.New(slog.DiscardHandler)}
	if change != nil {
		change(conf)
	}
	w, err := open(rc, deploy).NewWorker(conf)
	if err != nil {
		panic(err)
	}
	return w
}

func e2e(ctx context.Context, rc *redis.Client, n, concurrency int, payload any) result {
	c := newClient(rc)
	for done := 0; done < n; done += 1000 {
		subs := make([]dtq.Submission, min(1000, n-done))
		for i := range subs {
			subs[i] = dtq.Submission{Type: "noop", Payload: payload}
		}
		if _, err := c.SubmitBatch(ctx, subs); err != nil {
			panic(err)
		}
	}
	w := newWorker(rc, concurrency)
	tick, allDone := countdown(n)
	w.HandleFunc("noop", func(ctx context.Context, t *dtq.Task) (any, error) { tick(); return nil, nil })
	before := readStats(ctx, rc)
	start := time.Now()
	stop := runWorker(ctx, w)
	<-allDone
	// The last finalize may still be in flight: wait for the depth to drain.
	waitDrained(ctx, rc)
	el := time.Since(start)
	after := readStats(ctx, rc)
	dumpCommandStats(ctx, rc)
	stop()
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(),
		Note: fmt.Sprintf("concurrency=%d GOMAXPROCS=%d", concurrency, runtime.GOMAXPROCS(0))}
	charge(&r, before, after, int64(n))
	return r
}

func latency(ctx context.Context, rc *redis.Client, rate int, d time.Duration, concurrency int) result {
	c := newClient(rc)
	w := newWorker(rc, concurrency)
	var mu sync.Mutex
	var lat []float64
	w.HandleFunc("stamp", func(ctx context.Context, t *dtq.Task) (any, error) {
		var p struct{ SentNS int64 }
		_ = json.Unmarshal(t.Payload, &p)
		ms := float64(time.Now().UnixNano()-p.SentNS) / 1e6
		mu.Lock()
		lat = append(lat, ms)
		mu.Unlock()
		return nil, nil
	})
	stop := runWorker(ctx, w)
	_, _ = c.Submit(ctx, dtq.Submission{Type: "stamp", Payload: map[string]int64{"SentNS": time.Now().UnixNano()}})
	time.Sleep(500 * time.Millisecond) // let the worker reach its blocking read

	before := readStats(ctx, rc)
	mu.Lock()
	lat = lat[:0]
	mu.Unlock()
	interval := time.Second / time.Duration(rate)
	total := int(d / interval)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range total {
		due := start.Add(time.Duration(i) * interval)
		if s := time.Until(due); s > 0 {
			time.Sleep(s)
		}
		wg.Go(func() {
			_, err := c.Submit(ctx, dtq.Submission{Type: "stamp", Payload: map[string]int64{"SentNS": time.Now().UnixNano()}})
			if err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	for {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got >= total {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	el := time.Since(start)
	after := readStats(ctx, rc)
	dumpCommandStats(ctx, rc)
	stop()
	mu.Lock()
	slices.Sort(lat)
	p := func(q float64) float64 { return lat[int(math.Min(float64(len(lat)-1), q*float64(len(lat))))] }
	r := result{Tasks: int64(total), Seconds: el.Seconds(), PerSecond: float64(total) / el.Seconds(),
		P50ms: p(0.50), P99ms: p(0.99), Note: fmt.Sprintf("open loop at %d/s, submit->handler start", rate)}
	mu.Unlock()
	charge(&r, before, after, int64(total))
	return r
}

// queueStats measures how long reading one queue's stats takes with n tasks
// queued (the counters and structure sizes, never a scan).
func queueStats(ctx context.Context, rc *redis.Client, n int, payload any) result {
	c := newClient(rc)
	for done := 0; done < n; done += 1000 {
		subs := make([]dtq.Submission, min(1000, n-done))
		for i := range subs {
			subs[i] = dtq.Submission{Type: "noop", Payload: payload, Priority: new(i % 10)}
		}
		if _, err := c.SubmitBatch(ctx, subs); err != nil {
			panic(err)
		}
	}
	in := open(rc, nil).Inspector()
	var lat []float64
	for range 200 {
		start := time.Now()
		qi, err := in.GetQueue(ctx, "default")
		if err != nil || qi.Depth != int64(n) {
			panic(fmt.Sprint(err, qi))
		}
		lat = append(lat, float64(time.Since(start).Microseconds())/1000)
	}
	slices.Sort(lat)
	return result{Tasks: int64(n), P50ms: lat[len(lat)/2], P99ms: lat[len(lat)*99/100],
		Note: "GetQueue latency with n tasks queued, 200 reads"}
}

// startReplicas attaches n replicas to the server at addr and waits until
// their links are up.
func startReplicas(addr string, n int) (stop func()) {
	var rs []*redistest.Server
	stop = func() {
		for _, r := range rs {
			r.Stop()
		}
	}
	for range n {
		r, err := redistest.Start("--replicaof", strings.Replace(addr, ":", " ", 1))
		if err != nil {
			stop()
			panic(err)
		}
		rs = append(rs, r)
	}
	for _, r := range rs {
		rc := redis.NewClient(&redis.Options{Addr: r.Addr})
		for !strings.Contains(rc.Info(context.Background(), "replication").Val(), "master_link_status:up") {
			time.Sleep(20 * time.Millisecond)
		}
		rc.Close()
	}
	return stop
}

// setEvents sets queue's event detail (QueueLimits.Events), before the
// scenario's clients and workers read it.
func setEvents(ctx context.Context, rc *redis.Client, queue, events string) error {
	a, err := open(rc, nil).NewAdmin(nil)
	if err != nil {
		return err
	}
	return a.SetLimits(ctx, queue, dtqtype.QueueLimits{Events: events})
}
