package partitionsuite_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/redistest"
)

// clientOpts are the children's Redis client options: a partition is
// noticed within seconds, as a production deployment would configure.
const clientOpts = "dial_timeout=1s&read_timeout=2s&write_timeout=2s"

// world is one scenario's deployment: hosts, Redis (Sentinel or Cluster),
// dtq API servers and workers, the observer's client (from the root
// namespace, never partitioned) and the record of what happened.
type world struct {
	t      *testing.T
	name   string
	net    *network
	dir    string
	url    string // the children's Redis URL
	prefix string
	acks   int
	kind   string // "sentinel" or "cluster"

	redis     map[string]*redisNode // host -> node
	sentinels []*redisNode
	apis      map[string]*proc
	workers   map[string]*proc

	obs  redis.UniversalClient
	insp *dtq.Inspector

	mu          sync.Mutex
	history     []porcupine.Operation
	start       time.Time
	blind       []span             // spans when a read may come from an isolated master
	killed      map[string][]int64 // worker -> unix ns of each kill
	paused      map[string][]span  // worker -> its pauses
	faults      int
	lastHeal    time.Time
	acked       map[string]string // key -> task id an answer acknowledged
	seen        map[string]string // task id -> key, any answer naming it
	byKey       map[string]string // key -> the last task id a submit answer named
	unexpected  []string
	answers     map[string]int
	clientsDone sync.WaitGroup
	stopClients context.CancelFunc
	clientCtx   context.Context
}

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// span is a time range in unix ns.
type span struct{ from, to int64 }

func newWorld(t *testing.T, name, kind string) *world {
	t.Helper()
	w := &world{t: t, name: name, kind: kind, net: newNetwork(t), dir: t.TempDir(), prefix: "p", acks: 1,
		redis: map[string]*redisNode{}, apis: map[string]*proc{}, workers: map[string]*proc{},
		killed: map[string][]int64{}, paused: map[string][]span{}, acked: map[string]string{}, seen: map[string]string{}, byKey: map[string]string{},
		answers: map[string]int{}, start: time.Now()}
	if err := os.Chmod(w.dir, 0o755); err != nil { // children run as root too; kept simple
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			w.dumpLogs()
		}
	})
	return w
}

// dumpLogs prints the tail of every child's log, for a failed run.
func (w *world) dumpLogs() {
	_ = filepath.WalkDir(w.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		b, _ := os.ReadFile(path)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		if len(bytes.TrimSpace(b)) > 0 {
			w.t.Logf("--- %s:\n%s", strings.TrimPrefix(path, w.dir), b)
		}
		return nil
	})
}

// sentinelWorld: r1 master, r2 and r3 its replicas, Sentinels on s1..s3,
// API servers on api1 and api2, workers on w1 and w2.
func sentinelWorld(t *testing.T, name string) *world {
	t.Helper()
	w := newWorld(t, name, "sentinel")
	w.net.add("r1", "r2", "r3", "s1", "s2", "s3", "api1", "api2", "w1", "w2")
	w.redis["r1"] = startRedis(t, w.net.h("r1"), w.dir)
	for _, r := range []string{"r2", "r3"} {
		w.redis[r] = startRedis(t, w.net.h(r), w.dir, "--replicaof", w.net.h("r1").ip, "6379")
	}
	for _, r := range []string{"r2", "r3"} {
		eventually(t, 30*time.Second, r+" never synced", func() bool {
			return strings.Contains(info(w.redis[r].addr, "replication"), "master_link_status:up")
		})
	}
	var addrs []string
	for _, s := range []string{"s1", "s2", "s3"} {
		n := startSentinel(t, w.net.h(s), w.dir, w.redis["r1"].addr)
		w.sentinels = append(w.sentinels, n)
		addrs = append(addrs, n.addr)
	}
	// Each Sentinel must know the replicas (and the others) before a fault.
	for _, s := range w.sentinels {
		eventually(t, 30*time.Second, "Sentinels never saw the replicas and each other", func() bool {
			sc := redis.NewSentinelClient(&redis.Options{Addr: s.addr})
			defer sc.Close()
			m, err := sc.Master(context.Background(), "m").Result()
			return err == nil && m["num-slaves"] == "2" && m["num-other-sentinels"] == "2"
		})
	}
	w.url = "redis+sentinel://" + strings.Join(addrs, ",") + "/m/0?" + clientOpts
	w.open()
	return w
}

// clusterWorld: masters and replicas on c1..c6 (redis-cli pairs them),
// API servers on api1 and api2, workers on w1 and w2.
func clusterWorld(t *testing.T, name string) *world {
	t.Helper()
	w := newWorld(t, name, "cluster")
	nodes := []string{"c1", "c2", "c3", "c4", "c5", "c6"}
	w.net.add(nodes...)
	w.net.add("api1", "api2", "w1", "w2")
	var addrs []string
	for _, c := range nodes {
		w.redis[c] = startRedis(t, w.net.h(c), w.dir, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds())))
		addrs = append(addrs, w.redis[c].addr)
	}
	cli, err := redistest.CLIBinary()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, out)
	}
	eventually(t, 60*time.Second, "the cluster never became healthy", func() bool { return w.clusterHealthy() })
	w.url = "redis+cluster://" + strings.Join(addrs, ",") + "?" + clientOpts
	w.open()
	return w
}

// clusterNodeTimeout is the Cluster's cluster-node-timeout.
const clusterNodeTimeout = 2 * time.Second

// clusterHealthy reports whether every running node sees the cluster ok
// and every replica's link up.
func (w *world) clusterHealthy() bool {
	for _, n := range w.redis {
		ci := clusterInfo(n.addr)
		if !strings.Contains(ci, "cluster_state:ok") || !strings.Contains(ci, "cluster_slots_ok:16384") {
			return false
		}
		repl := info(n.addr, "replication")
		if repl == "" || strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return false
		}
	}
	return true
}

func clusterInfo(addr string) string {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second})
	defer rc.Close()
	s, _ := rc.ClusterInfo(context.Background()).Result()
	return s
}

// open makes the observer's client and inspector.
func (w *world) open() {
	rc, err := config.NewRedisClient(w.url)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { rc.Close() })
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: w.prefix})
	if err != nil {
		w.t.Fatal(err)
	}
	w.obs, w.insp = rc, d.Inspector()
}

// role returns "master" or "slave" for the node at addr ("" if it does not
// answer).
func role(addr string) string {
	s := info(addr, "replication")
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return v
		}
	}
	return ""
}

// startAPI runs an API server on host h.
func (w *world) startAPI(h string) {
	w.apis[h] = dtqProc(w.t, w.net.h(h), w.dir, "api", h, urlEnv+"="+w.url, prefixEnv+"="+w.prefix,
		acksEnv+"="+strconv.Itoa(w.acks), listenEnv+"="+w.net.h(h).ip+":"+apiPort)
	url := "http://" + w.net.h(h).ip + ":" + apiPort + "/ready"
	eventually(w.t, 30*time.Second, "API on "+h+" never ready", func() bool {
		resp, err := (&http.Client{Timeout: time.Second}).Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// startWorker runs a worker on host h.
func (w *world) startWorker(h string) {
	w.workers[h] = dtqProc(w.t, w.net.h(h), w.dir, "worker", h, urlEnv+"="+w.url, prefixEnv+"="+w.prefix,
		acksEnv+"="+strconv.Itoa(w.acks), workerEnv+"="+h, eventsEnv+"="+w.eventsFile(h),
		visEnv+"="+strconv.Itoa(int(visibility.Milliseconds())))
}

func (w *world) eventsFile(worker string) string { return filepath.Join(w.dir, worker+".events") }

// blindFor marks reads between from and to (unix ns) as unknown: they may
// have been served by a master that is isolated.
func (w *world) blindFor(from, to time.Time) {
	w.mu.Lock()
	w.blind = append(w.blind, span{from.UnixNano(), to.UnixNano()})
	w.mu.Unlock()
}

// fault records that a fault began and returns its heal, which records when.
func (w *world) fault(desc string) {
	w.mu.Lock()
	w.faults++
	w.mu.Unlock()
	w.t.Logf("%s fault: %s", time.Since(w.start).Round(10*time.Millisecond), desc)
}

// healed records the end of every fault now.
func (w *world) healed() {
	w.mu.Lock()
	w.lastHeal = time.Now()
	w.mu.Unlock()
}

// killWorker kills worker h (SIGKILL) and records when: its open handler
// runs end there.
func (w *world) killWorker(h string) {
	w.workers[h].kill()
	w.mu.Lock()
	w.killed[h] = append(w.killed[h], time.Now().UnixNano())
	w.mu.Unlock()
}

// pauseWorker pauses worker h for d (SIGSTOP, SIGCONT).
func (w *world) pauseWorker(h string, d time.Duration) {
	from := time.Now()
	w.workers[h].signal(sigStop)
	time.Sleep(d) // the fault's length
	w.workers[h].signal(sigCont)
	w.mu.Lock()
	w.paused[h] = append(w.paused[h], span{from.UnixNano(), time.Now().UnixNano()})
	w.mu.Unlock()
}

// client is one producer: it submits, cancels and reads through the API on
// host api, recording every call in the history.
func (w *world) client(cid int, api string, rng *rand.Rand, hc *http.Client) {
	defer w.clientsDone.Done()
	base := "http://" + w.net.h(api).ip + ":" + apiPort
	for i := 0; w.clientCtx.Err() == nil; i++ {
		// Clients go through the keys at about the same pace, so a new key
		// is submitted by several at once; each key sees a few dozen calls.
		key := fmt.Sprintf("%s-k%d", w.name, i/4+rng.IntN(2))
		in := opInput{kind: opSubmit, key: key, api: api}
		if rng.IntN(20) == 0 {
			in.fp = 1 // the same key with other work
		}
		w.mu.Lock()
		id := w.byKey[key]
		w.mu.Unlock()
		if id != "" {
			switch rng.IntN(10) {
			case 0:
				in = opInput{kind: opCancel, key: key, id: id, api: api}
			case 1, 2, 3:
				in = opInput{kind: opRead, key: key, id: id, api: api}
			}
		}
		call := time.Now().UnixNano()
		out := w.call(hc, base, in)
		ret := time.Now().UnixNano()
		w.mu.Lock()
		w.answers[outcomeNames[out.out]]++
		if out.out == outUnknown {
			ret = math.MaxInt64 // it may take effect at any time after its call
		}
		if out.id != "" {
			w.seen[out.id] = key
			if in.kind == opSubmit {
				w.byKey[key] = out.id
			}
			switch out.out {
			case outCreated, outReplay, outInProgress, outMismatch:
				w.acked[key] = out.id
			}
		}
		w.history = append(w.history, porcupine.Operation{ClientId: cid, Input: in, Call: call, Output: out, Return: ret})
		w.mu.Unlock()
		time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond) // the load's pace
	}
}

// workMS is the handler time of key's task (variant fp): fixed per key and
// variant, so a resent submission is the same request.
func workMS(key string, fp int) int {
	h := 0
	for _, c := range key {
		h = h*31 + int(c)
	}
	return 100 + (h%200+200)%200 + fp
}

// call runs one operation against the API at base.
func (w *world) call(hc *http.Client, base string, in opInput) opOutput {
	var req *http.Request
	switch in.kind {
	case opSubmit:
		ms := workMS(in.key, in.fp)
		body, _ := json.Marshal(map[string]any{"task_type": taskType, "queue": queue, "payload": workPayload{Key: in.key, MS: ms}})
		req, _ = http.NewRequest(http.MethodPost, base+"/api/v1/tasks", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", in.key)
	case opCancel:
		req, _ = http.NewRequest(http.MethodPost, base+"/api/v1/tasks/"+in.id+"/cancel", nil)
	default:
		req, _ = http.NewRequest(http.MethodGet, base+"/api/v1/tasks/"+in.id, nil)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return opOutput{out: outUnknown}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var b struct {
		TaskID  string `json:"task_id"`
		Status  string `json:"status"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Details struct {
			TaskID string `json:"task_id"`
		} `json:"details"`
	}
	_ = json.Unmarshal(raw, &b)
	id := b.TaskID
	if id == "" {
		id = b.Details.TaskID
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && b.Code == "REDIS_UNAVAILABLE" && in.kind == opSubmit &&
		!strings.Contains(b.Message, "may not have happened"):
		return opOutput{out: outNotWritten}
	case resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		return opOutput{out: outUnknown, id: id}
	case in.kind == opSubmit && resp.StatusCode == http.StatusAccepted:
		return opOutput{out: outCreated, id: id}
	case in.kind == opSubmit && resp.StatusCode == http.StatusOK:
		return opOutput{out: outReplay, id: id}
	case in.kind == opSubmit && resp.StatusCode == http.StatusConflict:
		return opOutput{out: outInProgress, id: id}
	case in.kind == opSubmit && resp.StatusCode == http.StatusUnprocessableEntity:
		return opOutput{out: outMismatch, id: id}
	case resp.StatusCode == http.StatusNotFound:
		return opOutput{out: outNotFound}
	case in.kind == opCancel && resp.StatusCode == http.StatusAccepted:
		return opOutput{out: outDone}
	case in.kind == opCancel && resp.StatusCode == http.StatusConflict && b.Code == "TASK_TERMINAL":
		return opOutput{out: outTerminal}
	case in.kind == opRead && resp.StatusCode == http.StatusOK:
		return opOutput{out: outDone, ended: terminal(dtqtype.Status(b.Status)), cancelled: b.Status == string(dtqtype.StatusCancelled)}
	}
	w.mu.Lock()
	if len(w.unexpected) < 20 {
		w.unexpected = append(w.unexpected, fmt.Sprintf("%s %s answered %d: %s", []string{"submit", "cancel", "read"}[in.kind], in.key, resp.StatusCode, raw))
	}
	w.mu.Unlock()
	return opOutput{out: outUnknown, id: id}
}

// terminal reports whether s ends a task.
func terminal(s dtqtype.Status) bool {
	switch s {
	case dtqtype.StatusSucceeded, dtqtype.StatusFailed, dtqtype.StatusDeadLettered, dtqtype.StatusCancelled, dtqtype.StatusExpired:
		return true
	}
	return false
}

// startClients runs n producers, spread over the API hosts.
func (w *world) startClients(n int, seed uint64) {
	w.clientCtx, w.stopClients = context.WithCancel(context.Background())
	apis := slices.Sorted(maps.Keys(w.apis))
	for i := range n {
		w.clientsDone.Add(1)
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		hc := &http.Client{Timeout: 30 * time.Second}
		go w.client(i, apis[i%len(apis)], rng, hc)
	}
	w.t.Cleanup(func() { w.stopClients(); w.clientsDone.Wait() })
}

// handlerRun is a handler run read from a worker's events.
type handlerRun struct {
	worker     string
	task       string
	attempt    int
	start, end int64 // end: math.MaxInt64 while open
	cause      string
}

// runs reads every worker's handler runs. A run of a killed worker left
// open ends at the kill.
func (w *world) runs() []handlerRun {
	var out []handlerRun
	for h := range w.workers {
		f, err := os.Open(w.eventsFile(h))
		if err != nil {
			continue
		}
		open := map[string]int{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) != 5 {
				continue
			}
			att, _ := strconv.Atoi(fs[2])
			at, _ := strconv.ParseInt(fs[3], 10, 64)
			k := fs[1] + "/" + fs[2]
			switch fs[0] {
			case "start":
				open[k] = len(out)
				out = append(out, handlerRun{worker: h, task: fs[1], attempt: att, start: at, end: math.MaxInt64})
			case "end":
				if i, ok := open[k]; ok {
					out[i].end, out[i].cause = at, fs[4]
					delete(open, k)
				}
			}
		}
		f.Close()
		w.mu.Lock()
		kills := slices.Clone(w.killed[h])
		w.mu.Unlock()
		for _, i := range open {
			for _, k := range kills {
				if k >= out[i].start {
					out[i].end, out[i].cause = k, "killed"
					break
				}
			}
		}
	}
	return out
}

// figures are one run's results, printed on one line.
type figures struct {
	ops, submits, acked, lost, stuck, unread, overlaps, pausedOverlaps, lateWrites, runs, leaseLostCancels, reclaimed int
	linearizable                                                                                                      string
}

// check stops the load, waits for rest (visibility + cluster-node-timeout +
// 10 s after the last heal), and checks the run: the history against the
// model, no acknowledged task lost, none stuck, no two handlers of a task
// at once, no result written by a handler whose lease was lost. It logs the
// scenario's figure line and returns the figures.
func (w *world) check(extra string) figures {
	t := w.t
	w.stopClients()
	w.clientsDone.Wait()
	w.mu.Lock()
	rest := w.lastHeal.Add(visibility + clusterNodeTimeout + 10*time.Second)
	w.mu.Unlock()
	time.Sleep(time.Until(rest)) // the promise is about the state at rest
	ctx := context.Background()
	var f figures

	// Reads at rest, through the observer; a read that fails (a client
	// still finding the new master) is tried again for a while.
	w.mu.Lock()
	acked := make(map[string]string, len(w.acked))
	for k, v := range w.acked {
		acked[k] = v
	}
	seen := make(map[string]string, len(w.seen))
	for k, v := range w.seen {
		seen[k] = v
	}
	history := slices.Clone(w.history)
	// A read that overlapped a span when a master may have been isolated
	// is unknown: it may have read what the isolated master then lost.
	for i, op := range history {
		if op.Input.(opInput).kind != opRead || op.Output.(opOutput).out == outUnknown {
			continue
		}
		for _, b := range w.blind {
			if op.Call <= b.to && op.Return >= b.from {
				history[i].Output, history[i].Return = opOutput{out: outUnknown}, math.MaxInt64
				w.answers["read_blind"]++
				break
			}
		}
	}
	unexpected := slices.Clone(w.unexpected)
	answers := fmt.Sprint(w.answers)
	w.mu.Unlock()
	infos := map[string]*dtqtype.TaskInfo{}
	var lostIDs, stuckIDs, unreadIDs []string
	ackedIDs := map[string]bool{}
	for _, id := range acked {
		ackedIDs[id] = true
	}
	for id := range seen {
		var ti *dtqtype.TaskInfo
		var err error
		for range 40 {
			ti, err = w.insp.GetTask(ctx, id)
			if err == nil || errors.Is(err, dtq.ErrTaskNotFound) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		switch {
		case errors.Is(err, dtq.ErrTaskNotFound):
			if ackedIDs[id] {
				lostIDs = append(lostIDs, id+" (key "+seen[id]+")")
			}
		case err != nil:
			unreadIDs = append(unreadIDs, id+": "+err.Error())
		default:
			infos[id] = ti
			if !terminal(ti.Status) {
				stuckIDs = append(stuckIDs, fmt.Sprintf("%s %s attempt %d", id, ti.Status, ti.Attempt))
			}
		}
	}
	f.acked, f.lost, f.stuck, f.unread = len(acked), len(lostIDs), len(stuckIDs), len(unreadIDs)

	// Handler runs: none of a task overlaps another (a paused worker's run
	// is counted apart: no process can stop a handler while it is frozen).
	runs := w.runs()
	f.runs = len(runs)
	byTask := map[string][]handlerRun{}
	for _, r := range runs {
		byTask[r.task] = append(byTask[r.task], r)
		if r.cause == "lease_lost" {
			f.leaseLostCancels++
		}
	}
	var overlapDesc []string
	for id, rs := range byTask {
		if len(rs) > 1 {
			f.reclaimed++
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].start < rs[j].start })
		for i := range rs {
			for j := i + 1; j < len(rs); j++ {
				a, b := rs[i], rs[j]
				if b.start >= a.end {
					continue
				}
				if w.wasPaused(a) || w.wasPaused(b) {
					f.pausedOverlaps++
					continue
				}
				f.overlaps++
				overlapDesc = append(overlapDesc, fmt.Sprintf("%s: %s attempt %d [%d, %d] %s and %s attempt %d from %d",
					id, a.worker, a.attempt, a.start, a.end, a.cause, b.worker, b.attempt, b.start))
			}
		}
	}
	// A succeeded task's result is from a run that ended ok and holding
	// its lease: the late finalize of a cancelled run writes nothing.
	var lateDesc []string
	for id, ti := range infos {
		if ti.Status != dtqtype.StatusSucceeded {
			continue
		}
		var res struct {
			Worker  string `json:"worker"`
			Attempt int    `json:"attempt"`
		}
		_ = json.Unmarshal(ti.Result, &res)
		ok := false
		for _, r := range byTask[id] {
			if r.worker == res.Worker && r.attempt == res.Attempt && r.cause == "ok" {
				ok = true
			}
		}
		if !ok && len(byTask[id]) > 0 {
			f.lateWrites++
			lateDesc = append(lateDesc, fmt.Sprintf("%s: result %s, runs %+v", id, ti.Result, byTask[id]))
		}
	}

	if os.Getenv("DTQN_TIMELINE") != "" {
		w.logTimeline(history)
	}
	// The history, key by key.
	f.ops = len(history)
	for _, op := range history {
		if op.Input.(opInput).kind == opSubmit {
			f.submits++
		}
	}
	perKey := map[string]int{}
	maxPerKey := 0
	for _, op := range history {
		k := op.Input.(opInput).key
		perKey[k]++
		maxPerKey = max(maxPerKey, perKey[k])
	}
	if maxPerKey > 200 {
		t.Errorf("a key has %d operations: the check per key is bounded at 200", maxPerKey)
	}
	res, vis := porcupine.CheckOperationsVerbose(submissionModel.ToModel(), history, 60*time.Second)
	f.linearizable = map[porcupine.CheckResult]string{porcupine.Ok: "ok", porcupine.Illegal: "ILLEGAL", porcupine.Unknown: "TIMEOUT"}[res]
	if res != porcupine.Ok {
		file := filepath.Join(os.TempDir(), fmt.Sprintf("dtq-partition-%s-%d.html", w.name, time.Now().UnixNano()))
		if err := porcupine.VisualizePath(submissionModel.ToModel(), vis, file); err == nil {
			t.Logf("visualization of the history: %s", file)
		}
		w.logIllegalKey(history)
	}

	line := fmt.Sprintf("scenario %s: ops=%d keys=%d max_ops_per_key=%d submits=%d acked=%d lost=%d stuck=%d unread=%d linearizable=%s overlaps=%d paused_overlaps=%d late_writes=%d handler_runs=%d tasks_run_twice=%d lease_lost_cancels=%d faults=%d%s answers=%s",
		w.name, f.ops, len(perKey), maxPerKey, f.submits, f.acked, f.lost, f.stuck, f.unread, f.linearizable, f.overlaps, f.pausedOverlaps, f.lateWrites,
		f.runs, f.reclaimed, f.leaseLostCancels, w.faults, extra, answers)
	fmt.Println(line)
	t.Log(line)
	if len(unexpected) > 0 {
		t.Errorf("answers the model does not know: %v", unexpected)
	}
	if f.linearizable != "ok" {
		t.Errorf("the history of submissions, cancels and reads is not linearizable (%s)", f.linearizable)
	}
	if len(lostIDs) > 0 {
		t.Errorf("acknowledged tasks lost: %v", lostIDs)
	}
	if len(stuckIDs) > 0 {
		t.Errorf("tasks not terminal at rest: %v", first(stuckIDs))
	}
	if len(unreadIDs) > 0 {
		t.Errorf("tasks that could not be read at rest: %v", first(unreadIDs))
	}
	if len(overlapDesc) > 0 {
		t.Errorf("two handlers of one task ran at once: %v", first(overlapDesc))
	}
	if len(lateDesc) > 0 {
		t.Errorf("results written by a handler that did not end ok: %v", first(lateDesc))
	}
	if f.acked < 20 {
		t.Errorf("only %d keys acknowledged: too little load to mean anything", f.acked)
	}
	return f
}

func first(s []string) []string { return s[:min(len(s), 10)] }

// wasPaused reports whether r's worker was paused while r ran.
func (w *world) wasPaused(r handlerRun) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.paused[r.worker] {
		if p.from <= r.end && p.to >= r.start {
			return true
		}
	}
	return false
}

// logIllegalKey logs the operations of the first key whose history the
// model cannot explain, in call order, relative to the scenario's start.
func (w *world) logIllegalKey(history []porcupine.Operation) {
	m := submissionModel.ToModel()
	for _, part := range m.Partition(history) {
		single := m
		single.Partition = nil
		if porcupine.CheckOperations(single, part) {
			continue
		}
		sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
		var b strings.Builder
		for _, op := range part {
			ret := "?"
			if op.Return != math.MaxInt64 {
				ret = strconv.FormatInt((op.Return-w.start.UnixNano())/1e6, 10)
			}
			fmt.Fprintf(&b, "  c%d [%d, %s] ms %s\n", op.ClientId, (op.Call-w.start.UnixNano())/1e6, ret, m.DescribeOperation(op.Input, op.Output))
		}
		w.t.Logf("the history of key %s the model cannot explain:\n%s", part[0].Input.(opInput).key, b.String())
		return
	}
}

// logTimeline logs, second by second of the scenario, how many calls
// returned each outcome (DTQN_TIMELINE=1): where the faults bit.
func (w *world) logTimeline(history []porcupine.Operation) {
	bySec := map[int64]map[string]int{}
	var last int64
	for _, op := range history {
		sec := (op.Call - w.start.UnixNano()) / 1e9
		if bySec[sec] == nil {
			bySec[sec] = map[string]int{}
		}
		in, o := op.Input.(opInput), op.Output.(opOutput)
		bySec[sec][[]string{"submit", "cancel", "read"}[in.kind]+":"+outcomeNames[o.out]]++
		last = max(last, sec)
	}
	for s := range last + 1 {
		w.t.Logf("t=%ds %v", s, bySec[s])
	}
}

// callsThrough summarizes the calls through API host api that were made
// between from and to: how many, how many it answered before to and with
// what, and the longest.
func (w *world) callsThrough(api string, from, to time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, answered := 0, map[string]int{}
	var longest time.Duration
	for _, op := range w.history {
		in, o := op.Input.(opInput), op.Output.(opOutput)
		if in.api != api || op.Call < from.UnixNano() || op.Call > to.UnixNano() {
			continue
		}
		n++
		if op.Return != math.MaxInt64 {
			longest = max(longest, time.Duration(op.Return-op.Call))
			if op.Return <= to.UnixNano() {
				answered[outcomeNames[o.out]]++
			}
		}
	}
	return fmt.Sprintf("calls=%d answered_during=%v longest=%s", n, answered, longest.Round(10*time.Millisecond))
}
