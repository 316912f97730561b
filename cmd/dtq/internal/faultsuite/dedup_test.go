package faultsuite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// The deduplication fault scenarios (docs/deduplication.md, with
// docs/idempotency.md): producers submit with dedup keys of every mode
// through the API while the proxy cuts ingest calls, Redis goes away,
// replies are slow, a worker is stopped past its lease or Redis restarts;
// workers run the tasks. Each prints one FAULT line; see dedupRig.check
// for what each asserts.

// dedupSpecs are the modes under test with the settings every submission
// of the mode carries: a throttle period and a debounce window short
// enough that each key makes many tasks in a scenario.
var dedupSpecs = []struct {
	mode string
	spec map[string]any
}{
	{"drop", map[string]any{"mode": "drop"}},
	{"throttle", map[string]any{"mode": "throttle", "ttl": "1s"}},
	{"debounce", map[string]any{"mode": "debounce", "window": "150ms", "max_wait": "500ms"}},
	{"replace", map[string]any{"mode": "replace"}},
	{"keep_last", map[string]any{"mode": "keep_last"}},
}

const (
	dedupKeysPerMode = 3
	throttleTTL      = time.Second
	debounceWindow   = 150 * time.Millisecond
	debounceMaxWait  = 500 * time.Millisecond
)

// dedupSub is one submission and what it was told.
type dedupSub struct {
	mode, key string
	keyed     bool   // with an idempotency key: sent again until the answer is sure
	outcome   string // created, collapsed, replay (409 or 200 duplicate: an earlier send of it created the task), unknown, not_written
	taskID    string // the task the answer named ("" for none)
	dedup     string // the mode a collapsed answer names
	replaced  string // the task a created answer says it cancelled
	status    int
	body      string
}

// dedupAnswer reads one submission's HTTP answer.
func dedupAnswer(resp *http.Response, err error) dedupSub {
	if err != nil {
		return dedupSub{outcome: "unknown"} // between the test and the API: the request may have been served
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var b struct {
		TaskID       string `json:"task_id"`
		Duplicate    bool   `json:"duplicate"`
		Deduplicated string `json:"deduplicated"`
		Replaced     string `json:"replaced_task_id"`
		Code         string `json:"code"`
		Details      struct {
			TaskID string `json:"task_id"`
		} `json:"details"`
	}
	_ = json.Unmarshal(raw, &b)
	s := dedupSub{status: resp.StatusCode, body: string(raw), taskID: b.TaskID}
	if s.taskID == "" {
		s.taskID = b.Details.TaskID
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		s.outcome, s.replaced = "created", b.Replaced
	case resp.StatusCode == http.StatusOK && b.Deduplicated != "":
		s.outcome, s.dedup = "collapsed", b.Deduplicated
		if resp.Header.Get("Dtq-Deduplicated") != b.Deduplicated {
			s.outcome = "wrong" // the header and the body must agree
		}
	case resp.StatusCode == http.StatusOK && b.Duplicate,
		resp.StatusCode == http.StatusConflict && b.Code == "IDEMPOTENCY_IN_PROGRESS":
		s.outcome = "replay"
	case resp.StatusCode == http.StatusServiceUnavailable && b.Code == "REDIS_UNAVAILABLE":
		s.outcome = "not_written"
	case resp.StatusCode == http.StatusServiceUnavailable && b.Code == "OUTCOME_UNKNOWN":
		s.outcome = "unknown"
	case resp.StatusCode == http.StatusInternalServerError:
		s.outcome = "internal"
	default:
		s.outcome = "wrong"
	}
	return s
}

// dedupRig is a scenario rig (newRig: Redis, the proxy, the API and
// workers through it) with dedup producers.
type dedupRig struct {
	*rig
	keys rdb.Keys
	hc   *http.Client

	smu  sync.Mutex
	subs []*dedupSub
}

// dedupBody is the submission of key in mode: the payload names the key and
// a sequence number, and is kept once succeeded, so that a debounced task's
// last payload can be compared with the one its handler ran.
func dedupBody(mode, key string, n int, idem string) []byte {
	var spec map[string]any
	for _, s := range dedupSpecs {
		if s.mode == mode {
			spec = map[string]any{"key": key}
			for k, v := range s.spec {
				spec[k] = v
			}
		}
	}
	sub := map[string]any{"task_type": taskType, "queue": queue, "payload": map[string]any{"key": key, "n": n},
		"max_attempts": 5, "keep_payload": true, "dedup": spec}
	if idem != "" {
		sub["idempotency_key"] = idem
	}
	body, _ := json.Marshal(sub)
	return body
}

// submitDedup sends one submission: a keyed one again (same key) until
// its answer is sure or a minute passes, a keyless one once.
func (d *dedupRig) submitDedup(mode, key string, n int, idem string) *dedupSub {
	body := dedupBody(mode, key, n, idem)
	deadline := time.Now().Add(time.Minute)
	delay := 50 * time.Millisecond
	for {
		s := dedupAnswer(d.hc.Post(d.api.URL+"/api/v1/tasks", "application/json", bytes.NewReader(body)))
		s.mode, s.key, s.keyed = mode, key, idem != ""
		if s.outcome == "internal" {
			d.mu.Lock()
			d.internals++
			d.mu.Unlock()
		}
		sure := s.outcome != "unknown" && s.outcome != "not_written" && s.outcome != "internal"
		if idem == "" || sure || time.Now().After(deadline) {
			d.smu.Lock()
			d.subs = append(d.subs, &s)
			d.smu.Unlock()
			return &s
		}
		time.Sleep(delay) // a client's backoff before sending again
		delay = min(delay*2, time.Second)
	}
}

// produceDedup submits with keys of every mode, half of them with an
// idempotency key, until ctx ends.
func (d *dedupRig) produceDedup(ctx context.Context, p int, wg *sync.WaitGroup) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(uint64(p), 11))
	for i := 0; ctx.Err() == nil; i++ {
		mode := dedupSpecs[(i+p)%len(dedupSpecs)].mode
		key := fmt.Sprintf("%s-%d", mode, rng.IntN(dedupKeysPerMode))
		idem := ""
		if i%2 == 0 {
			idem = fmt.Sprintf("p%d-%d", p, i)
		}
		d.submitDedup(mode, key, p*1_000_000+i, idem)
		select {
		case <-ctx.Done():
		case <-time.After(d.sc.every):
		}
	}
}

// runDedup drives a dedup scenario: load, the fault, recovery, drain, then
// the checks and the FAULT line.
func runDedup(t *testing.T, sc scenario) {
	t.Parallel()
	d := &dedupRig{rig: newRig(t, sc), keys: rdb.NewKeys("f"), hc: &http.Client{Timeout: 15 * time.Second}}
	ctx := context.Background()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var producers sync.WaitGroup
	for p := range 4 {
		producers.Add(1)
		go d.produceDedup(loadCtx, p, &producers)
	}
	defer func() { stopLoad(); producers.Wait() }()
	require.Eventually(t, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return len(d.held) >= 20 },
		60*time.Second, 20*time.Millisecond, "the load never got going")

	sc.fault(t, d.rig)
	faultEnd := time.Now()
	probe := d.submitDedup("drop", "drop-probe", 0, "probe")
	require.Contains(t, []string{"created", "replay"}, probe.outcome, "the probe: %s", probe.body)
	require.Eventually(t, func() bool {
		ti, err := d.insp.GetTask(ctx, probe.taskID)
		return err == nil && ti.Status == dtqtype.StatusSucceeded
	}, 60*time.Second, 10*time.Millisecond, "a task submitted after the fault never succeeded")
	recovered := time.Since(faultEnd)
	time.Sleep(time.Second) // a little more load on the recovered system
	stopLoad()
	producers.Wait()

	// Every task ends: waiting keep_last tasks are released as their
	// running one ends, debounced ones once their window passes.
	var live []string
	require.Eventually(t, func() bool {
		live = d.liveTasks(t)
		return len(live) == 0
	}, 90*time.Second, 100*time.Millisecond, "tasks left live: %v", live)
	d.check(t, sc.name, recovered)
}

// liveTasks lists the queue's tasks not yet terminal.
func (d *dedupRig) liveTasks(t *testing.T) []string {
	var out []string
	for id, ti := range d.tasks(t) {
		if !terminal(ti.Status) {
			out = append(out, id+" "+string(ti.Status))
		}
	}
	return out
}

// tasks reads every task of the queue.
func (d *dedupRig) tasks(t *testing.T) map[string]*dtqtype.TaskInfo {
	ctx := context.Background()
	out := map[string]*dtqtype.TaskInfo{}
	prefix := d.keys.TaskPrefix(queue)
	iter := d.direct.ScanType(ctx, 0, prefix+"*", 1000, "hash").Iterator()
	for iter.Next(ctx) {
		id := strings.TrimPrefix(iter.Val(), prefix)
		ti, err := d.insp.GetTask(ctx, id)
		require.NoError(t, err)
		out[id] = ti
	}
	require.NoError(t, iter.Err())
	return out
}

// dedupEvent is one event of the queue's feed, in order.
type dedupEvent struct {
	ms         int64 // the entry id's time: Redis's clock when the script ran
	typ, id    string
	replacedBy string // TASK_DEDUPLICATED of a task a newer one cancelled
	prevStatus string
	mode       string
}

func (d *dedupRig) events(t *testing.T) []dedupEvent {
	ctx := context.Background()
	key := d.keys.Events(queue)
	info, err := d.direct.XInfoStream(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, info.EntriesAdded, info.Length, "the event stream was trimmed: the checks need all of it")
	xs, err := d.direct.XRange(ctx, key, "-", "+").Result()
	require.NoError(t, err)
	out := make([]dedupEvent, 0, len(xs))
	for _, x := range xs {
		var ms int64
		_, _ = fmt.Sscanf(x.ID, "%d-", &ms)
		e := dedupEvent{ms: ms}
		e.typ, _ = x.Values["type"].(string)
		e.id, _ = x.Values["task_id"].(string)
		if meta, _ := x.Values["meta"].(string); meta != "" && e.typ == "TASK_DEDUPLICATED" {
			var m struct {
				Mode       string `json:"mode"`
				ReplacedBy string `json:"replaced_by"`
				Previous   string `json:"previous_status"`
			}
			require.NoError(t, json.Unmarshal([]byte(meta), &m), "%s", meta)
			e.mode, e.replacedBy, e.prevStatus = m.Mode, m.ReplacedBy, m.Previous
		}
		out = append(out, e)
	}
	return out
}

// modeOf is the mode of key ("drop-2" -> drop).
func modeOf(key string) string {
	i := strings.LastIndexByte(key, '-')
	if i < 0 {
		return ""
	}
	return key[:i]
}

// check asserts, once every task ended:
//   - every sure answer is true: a created, collapsed or replayed answer
//     names a task that exists and has the submission's key (and, when
//     collapsed, a collapsing mode: the one submitted); a replace or
//     keep_last answer's cancelled task was queued, not running, and was
//     cancelled by that submission; REDIS_UNAVAILABLE names no task that
//     exists; every task Redis holds was named by an answer;
//   - drop: never two live tasks of one key at once (in the event feed's
//     order, which is the order the scripts ran in);
//   - throttle: a key's tasks are created at least its ttl apart;
//   - debounce: a task's start is never before its last push (no collapse
//     after it was queued), its available_at never past created + max_wait,
//     and its handler ran the last payload pushed;
//   - replace and keep_last never cancel a running task; keep_last never
//     has two running tasks of a key;
//   - the depth counter is the number of live tasks (0), no leases, no
//     waiting or scheduled entries, and no dedup record left but throttle
//     records within their ttl.
func (d *dedupRig) check(t *testing.T, name string, recovered time.Duration) {
	ctx := context.Background()
	tasks := d.tasks(t)
	evs := d.events(t)
	d.smu.Lock()
	subs := slices.Clone(d.subs)
	d.smu.Unlock()

	var wrong []string
	named := map[string]bool{}
	counts := map[string]int{}
	replacedBy := map[string]string{} // cancelled task -> the submission's task that says it cancelled it
	for _, s := range subs {
		counts[s.outcome]++
		if s.taskID != "" {
			named[s.taskID] = true
		}
		ti := tasks[s.taskID]
		switch s.outcome {
		case "created", "replay", "collapsed":
			switch {
			case ti == nil:
				wrong = append(wrong, fmt.Sprintf("%s answer for key %s names task %s, which does not exist", s.outcome, s.key, s.taskID))
			case ti.DedupKey != s.key:
				wrong = append(wrong, fmt.Sprintf("%s answer for key %s names task %s of key %q", s.outcome, s.key, s.taskID, ti.DedupKey))
			case s.outcome == "collapsed" && (s.dedup != s.mode || s.mode == "replace" || s.mode == "keep_last"):
				wrong = append(wrong, fmt.Sprintf("a %s submission answered collapsed by %s", s.mode, s.dedup))
			}
			if s.replaced != "" {
				replacedBy[s.replaced] = s.taskID
				if rt := tasks[s.replaced]; rt == nil || rt.DedupKey != s.key || rt.Status != dtqtype.StatusCancelled {
					wrong = append(wrong, fmt.Sprintf("task %s says it replaced %s, which is not a cancelled task of key %s", s.taskID, s.replaced, s.key))
				}
			}
		case "not_written":
			if ti != nil {
				wrong = append(wrong, fmt.Sprintf("REDIS_UNAVAILABLE for key %s, but its task %s exists", s.key, s.taskID))
			}
		case "unknown":
			if ti != nil && ti.DedupKey != s.key {
				wrong = append(wrong, fmt.Sprintf("unknown answer's task %s has key %q, not %s", s.taskID, ti.DedupKey, s.key))
			}
		default:
			wrong = append(wrong, fmt.Sprintf("%s submission for key %s answered %d: %s", s.mode, s.key, s.status, s.body))
		}
	}
	unnamed := 0
	for id := range tasks {
		if !named[id] {
			unnamed++
		}
	}
	if unnamed > 0 {
		// (only an unknown answer between the test and the API could leave a task nameless; none is expected)
		wrong = append(wrong, fmt.Sprintf("%d tasks exist that no answer named", unnamed))
	}

	// The feed, in the order the scripts ran.
	live := map[string]map[string]bool{}    // key -> live tasks
	running := map[string]map[string]bool{} // key -> running tasks
	seen := map[string]bool{}
	queued := map[string]bool{} // debounce tasks promoted (queued)
	lastCreated := map[string]int64{}
	minGap := int64(math.MaxInt64)
	keyOf := func(id string) string {
		if ti := tasks[id]; ti != nil {
			return ti.DedupKey
		}
		return ""
	}
	set := func(m map[string]map[string]bool, k string) map[string]bool {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		return m[k]
	}
	overlaps, runOverlaps, cancelledRunning, lateCollapses := 0, 0, 0, 0
	history := map[string][]string{} // task -> its events, for the messages
	startedMs := map[string]int64{}  // task -> its first TASK_STARTED's time
	for _, e := range evs {
		history[e.id] = append(history[e.id], fmt.Sprintf("%s@%d", e.typ, e.ms))
		k := keyOf(e.id)
		if k == "" {
			continue
		}
		mode := modeOf(k)
		if !seen[e.id] {
			seen[e.id] = true
			if mode == "drop" && len(live[k]) > 0 {
				overlaps++
				wrong = append(wrong, fmt.Sprintf("drop key %s: task %s created while %v live", k, e.id, live[k]))
			}
			if mode == "throttle" {
				if last, ok := lastCreated[k]; ok {
					gap := e.ms - last
					minGap = min(minGap, gap)
					if gap < throttleTTL.Milliseconds()-2 { // (the clock of one Redis; 2 ms for the script's own run)
						wrong = append(wrong, fmt.Sprintf("throttle key %s: task %s created %d ms after the previous one", k, e.id, gap))
					}
				}
				lastCreated[k] = e.ms
			}
			set(live, k)[e.id] = true
			continue
		}
		switch {
		case e.typ == "TASK_STARTED":
			if startedMs[e.id] == 0 {
				startedMs[e.id] = e.ms
			}
			if mode == "keep_last" && len(running[k]) > 0 && !running[k][e.id] {
				runOverlaps++
				wrong = append(wrong, fmt.Sprintf("keep_last key %s: task %s started while %v ran", k, e.id, running[k]))
			}
			set(running, k)[e.id] = true
		case e.typ == "TASK_QUEUED" && mode == "debounce":
			queued[e.id] = true
		case e.typ == "TASK_DEDUPLICATED" && e.replacedBy == "":
			if mode == "debounce" && queued[e.id] {
				lateCollapses++
				wrong = append(wrong, fmt.Sprintf("debounce task %s took a submission after it was queued", e.id))
			}
		case e.typ == "TASK_DEDUPLICATED":
			if running[k][e.id] || e.prevStatus == "running" {
				cancelledRunning++
				wrong = append(wrong, fmt.Sprintf("%s key %s: running task %s cancelled by %s", mode, k, e.id, e.replacedBy))
			}
			if want, ok := replacedBy[e.id]; ok && want != e.replacedBy {
				wrong = append(wrong, fmt.Sprintf("task %s was cancelled by %s, but %s says it replaced it", e.id, e.replacedBy, want))
			}
			delete(live[k], e.id)
			delete(running[k], e.id)
		case terminalEvents[e.typ]:
			delete(live[k], e.id)
			delete(running[k], e.id)
		case e.typ == "TASK_RETRY_SCHEDULED", e.typ == "TASK_LEASE_LOST":
			delete(running[k], e.id)
		}
	}

	// The tasks themselves.
	childPayloads, _ := d.direct.HGetAll(ctx, d.prefix+":test:child_payloads").Result()
	d.mu.Lock()
	duplicates, debounced, pushed := 0, 0, 0
	maxDelay := time.Duration(0)
	for id, ti := range tasks {
		duplicates += max(0, d.runs[id]-1)
		ran := d.payloads[id]
		if ran == "" {
			ran = childPayloads[id]
		}
		if ran != "" {
			var p struct {
				Key string `json:"key"`
			}
			if json.Unmarshal([]byte(ran), &p) != nil || p.Key != ti.DedupKey {
				wrong = append(wrong, fmt.Sprintf("task %s of key %s ran with payload %s", id, ti.DedupKey, ran))
			}
		}
		if modeOf(ti.DedupKey) != "debounce" || ti.Status != dtqtype.StatusSucceeded {
			continue
		}
		debounced++
		delay := ti.AvailableAt.Sub(ti.CreatedAt.Time)
		maxDelay = max(maxDelay, delay)
		if delay > debounceWindow {
			pushed++
		}
		// When the claim ran, by Redis's clock: the task's started_at is the
		// claim call's own time, taken before its first send, so a claim
		// sent again after a lost reply records a time before it ran.
		started := startedMs[id]
		switch {
		case delay > debounceMaxWait:
			wrong = append(wrong, fmt.Sprintf("debounce task %s made to wait %s, past max_wait", id, delay))
		case delay < debounceWindow:
			wrong = append(wrong, fmt.Sprintf("debounce task %s waited %s, less than its window", id, delay))
		case started > 0 && started < ti.AvailableAt.UnixMilli():
			wrong = append(wrong, fmt.Sprintf("debounce task %s started at %d, before its last push's %d; events %v",
				id, started, ti.AvailableAt.UnixMilli(), history[id]))
		case ran != "" && ran != string(ti.Payload):
			wrong = append(wrong, fmt.Sprintf("debounce task %s ran %s, but its last payload is %s", id, ran, ti.Payload))
		}
	}
	internals := d.internals
	d.mu.Unlock()

	// What the queue holds now.
	depth := d.direct.Get(ctx, d.keys.Depth(queue)).Val()
	leaked := 0
	iter := d.direct.Scan(ctx, 0, d.keys.DedupPrefix(queue)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		// The record and its ttl in one transaction: a throttle record may
		// expire between two reads, and one the scan saw and that has
		// expired since is not left behind.
		var recCmd *redis.MapStringStringCmd
		var pttlCmd *redis.DurationCmd
		_, err := d.direct.TxPipelined(ctx, func(p redis.Pipeliner) error {
			recCmd = p.HGetAll(ctx, iter.Val())
			pttlCmd = p.PTTL(ctx, iter.Val())
			return nil
		})
		require.NoError(t, err)
		rec, pttl := recCmd.Val(), pttlCmd.Val()
		if pttl == -2 {
			continue // expired since the scan
		}
		if rec["m"] == "throttle" && pttl > 0 && pttl <= throttleTTL && rec["run"] == "" {
			continue // held for its ttl, as throttle is
		}
		leaked++
		wrong = append(wrong, fmt.Sprintf("dedup record %s left: %v (pttl %s)", iter.Val(), rec, pttl))
	}
	require.NoError(t, iter.Err())
	if minGap == math.MaxInt64 {
		minGap = -1 // no throttle key made two tasks
	}

	line := fmt.Sprintf("FAULT dedup_%s: submissions=%d created=%d collapsed=%d replay=%d unknown=%d not_written=%d replaced=%d "+
		"tasks=%d debounced=%d pushed=%d debounce_max_delay=%s throttle_min_gap=%dms drop_overlaps=%d keep_last_overlaps=%d "+
		"running_cancelled=%d late_collapses=%d leaked_records=%d duplicates=%d proxy_cuts=%d recovered_in=%s",
		name, len(subs), counts["created"], counts["collapsed"], counts["replay"], counts["unknown"], counts["not_written"],
		len(replacedBy), len(tasks), debounced, pushed, maxDelay.Round(time.Millisecond), minGap, overlaps, runOverlaps,
		cancelledRunning, lateCollapses, leaked, duplicates, d.proxy.Cuts(), recovered.Round(10*time.Millisecond))
	fmt.Println(line)
	t.Log(line)
	require.Empty(t, wrong)
	require.Zero(t, internals, "500 answers")
	require.Equal(t, "0", depth, "the depth counter must be the number of live tasks: none")
	require.Zero(t, d.direct.ZCard(ctx, d.keys.Lease(queue)).Val(), "leases left")
	require.Zero(t, d.direct.ZCard(ctx, d.keys.Waiting(queue)).Val(), "waiting tasks left")
	require.Zero(t, d.direct.ZCard(ctx, d.keys.Schedule(queue)).Val(), "scheduled tasks left")
	for _, m := range []string{"collapsed", "created"} {
		require.Positive(t, counts[m], "no submission was %s: the scenario tested little", m)
	}
	require.Positive(t, len(replacedBy), "no replace or keep_last submission cancelled a queued task")
	require.Positive(t, pushed, "no debounce submission pushed a waiting task")
}

// ingestCuts loses the reply of, or cuts before it is sent, one ingest
// call in every few for 3 s, and resets every connection now and then.
func ingestCuts(t *testing.T, r *rig) {
	ingest := []byte(rdb.ScriptHash("ingest"))
	end := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		if i%2 == 0 {
			r.proxy.CutAfter(ingest, 1)
		} else {
			r.proxy.CutBefore(ingest, 1)
		}
		time.Sleep(50 * time.Millisecond) // the fault's pace
		if i%10 == 9 {
			r.proxy.ResetAll()
		}
	}
	r.proxy.CutAfter(nil, 0)
	require.Positive(t, r.proxy.Cuts(), "no ingest call was cut")
}

// TestFaultDedup runs the dedup load under each fault.
func TestFaultDedup(t *testing.T) {
	t.Parallel()
	tests := []scenario{
		{name: "ingest_cuts", fault: ingestCuts},
		{name: "resets_mid_finalize", maxAttempts: 1, fault: resetMidFinalize},
		{name: "outage_5s", visibility: 9 * time.Second, fault: func(t *testing.T, r *rig) {
			r.proxy.SetDown(true)
			time.Sleep(5 * time.Second)
			r.proxy.SetDown(false)
		}},
		{name: "latency_500ms", fault: func(t *testing.T, r *rig) {
			r.proxy.SetLatency(500 * time.Millisecond)
			time.Sleep(4 * time.Second)
			r.proxy.SetLatency(0)
		}},
		{name: "sigstop_past_lease", workers: 1, child: true, work: 100 * time.Millisecond, every: 40 * time.Millisecond,
			fault: pauseChildPastLease},
		{name: "redis_restart_aof", visibility: 9 * time.Second, redisArgs: []string{"--appendonly", "yes", "--appendfsync", "always"},
			fault: func(t *testing.T, r *rig) {
				r.srv.Kill()
				time.Sleep(time.Second)
				require.NoError(t, r.srv.Restart())
			}},
	}
	for _, sc := range tests {
		t.Run(sc.name, func(t *testing.T) { runDedup(t, sc) })
	}
}

// TestDedupCollapsedResend: a collapsed submission whose ingest reply is
// lost (the call reached Redis; go-redis and the client send it again)
// answers collapsed into the same task, and the resent call writes
// nothing: one TASK_DEDUPLICATED event, one count, a debounce pushed once.
// A replace or keep_last submission sent again answers its own task and
// cancels the queued one once.
func TestDedupCollapsedResend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode  string
		keyed bool
	}{
		{"drop", false}, {"drop", true}, {"throttle", false}, {"throttle", true},
		{"debounce", false}, {"debounce", true}, {"replace", false}, {"replace", true},
		{"keep_last", false}, {"keep_last", true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/keyed=%v", tc.mode, tc.keyed), func(t *testing.T) {
			t.Parallel()
			d := &dedupRig{rig: newRig(t, scenario{name: "resend", workers: -1}), keys: rdb.NewKeys("f"), hc: &http.Client{Timeout: 15 * time.Second}}
			ctx := context.Background()
			key := tc.mode + "-0"
			first := d.submitDedup(tc.mode, key, 1, "")
			require.Equal(t, "created", first.outcome, first.body)
			idem := ""
			if tc.keyed {
				idem = "second"
			}
			d.proxy.CutAfter([]byte(rdb.ScriptHash("ingest")), 1)
			second := d.submitDedup(tc.mode, key, 2, idem)
			require.EqualValues(t, 1, d.proxy.Cuts(), "the second submission's reply was lost once")
			evs := d.events(t)
			if tc.mode == "replace" || tc.mode == "keep_last" {
				require.Equal(t, "created", second.outcome, second.body)
				require.NotEqual(t, first.taskID, second.taskID)
				require.Equal(t, first.taskID, second.replaced, "a resent call answers as its first run did")
				n := 0
				for _, e := range evs {
					if e.typ == "TASK_DEDUPLICATED" && e.id == first.taskID {
						n++
					}
				}
				require.Equal(t, 1, n, "the queued task was cancelled once")
				require.Equal(t, "1", d.direct.Get(ctx, d.keys.Depth(queue)).Val())
				return
			}
			require.Equal(t, "collapsed", second.outcome, second.body)
			require.Equal(t, tc.mode, second.dedup)
			require.Equal(t, first.taskID, second.taskID, "collapsed into the same task")
			n := 0
			for _, e := range evs {
				if e.typ == "TASK_DEDUPLICATED" {
					n++
				}
			}
			require.Equal(t, 1, n, "one TASK_DEDUPLICATED event: the resend wrote nothing")
			require.Equal(t, "1", d.direct.HGet(ctx, d.keys.DedupCounts(queue), tc.mode).Val())
			require.Equal(t, "1", d.direct.Get(ctx, d.keys.Depth(queue)).Val())
			// A third send of the same keyed submission answers the same.
			if tc.keyed {
				third := d.submitDedup(tc.mode, key, 2, idem)
				require.Equal(t, "collapsed", third.outcome, third.body)
				require.Equal(t, first.taskID, third.taskID)
			}
		})
	}
}

// The sequential model of drop mode the linearizability check holds the
// API to, per dedup key (keys are independent, one queue, no worker): the
// key is free or held by a task; a submission on a held key answers that
// task and creates nothing; on a free key it creates a new task, which
// holds the key; the end of the holder (a cancel here) frees it.

// dropOp is a recorded operation: a submission with the drop key, or the
// cancel of a task of the key.
type dropOp struct {
	cancel bool
	key    string
	id     string // cancel: the task
}

// dropOut is what an operation was told.
type dropOut struct {
	out string // created, collapsed, unknown, not_written; cancel: done
	id  string // the task named
}

var dropModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(dropOp).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{""} },
	Step: func(state, input, output any) []any {
		holder, in, o := state.(string), input.(dropOp), output.(dropOut)
		same := []any{holder}
		if in.cancel {
			switch {
			case o.out == "unknown" && in.id == holder:
				return []any{holder, ""}
			case o.out == "unknown", o.out == "not_written":
				return same
			case o.out == "done" && in.id == holder:
				return []any{""}
			case o.out == "done", o.out == "not_found":
				return same // an ended task (cancelling it again is no error), or one never created
			}
			return nil
		}
		switch o.out {
		case "created":
			if holder == "" {
				return []any{o.id}
			}
		case "collapsed":
			if holder != "" && o.id == holder {
				return same
			}
		case "not_written":
			return same
		case "unknown":
			// nothing, collapsed (no change), or created its task
			if holder == "" && o.id != "" {
				return []any{holder, o.id}
			}
			return same
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, o := input.(dropOp), output.(dropOut)
		if in.cancel {
			return fmt.Sprintf("cancel(%s) -> %s", in.id, o.out)
		}
		return fmt.Sprintf("submit(%s) -> %s %s", in.key, o.out, o.id)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("{holder %q}", state.(string)) },
}

// dropCall runs one operation against the API.
func (d *dedupRig) dropCall(in dropOp) dropOut {
	if !in.cancel {
		s := d.submitDedup("drop", in.key, 0, "")
		switch s.outcome {
		case "created", "collapsed", "unknown", "not_written":
			return dropOut{out: s.outcome, id: s.taskID}
		}
		panic(fmt.Sprintf("submit %s answered %d: %s", in.key, s.status, s.body))
	}
	resp, err := d.hc.Post(d.api.URL+"/api/v1/tasks/"+in.id+"/cancel", "application/json", nil)
	if err != nil {
		return dropOut{out: "unknown"}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted:
		return dropOut{out: "done"}
	case http.StatusNotFound:
		return dropOut{out: "not_found"}
	case http.StatusServiceUnavailable:
		return dropOut{out: "unknown"}
	}
	panic(fmt.Sprintf("cancel %s answered %d: %s", in.id, resp.StatusCode, raw))
}

// TestDedupDropLinearizable records concurrent drop submissions and
// cancels (the end of a task) on a few keys, through the API, while the
// proxy loses the replies of ingest and cancel calls (go-redis and the
// client send them again) or cuts them before they are sent, and resets
// every connection now and then, and once goes away for 4 s; the history must be explainable by
// dropModel executed one operation at a time. An answer whose outcome is
// unknown may have taken effect at any time after its call, or not at all.
func TestDedupDropLinearizable(t *testing.T) {
	t.Parallel()
	d := &dedupRig{rig: newRig(t, scenario{name: "drop_linearizable", workers: -1}), keys: rdb.NewKeys("f"),
		hc: &http.Client{Timeout: 20 * time.Second}}
	const clients, opsEach, keys = 6, 80, 3
	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		seen    = map[string][]string{} // key -> tasks answers named
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ingest, cancel := []byte(rdb.ScriptHash("ingest")), []byte(rdb.ScriptHash("cancel"))
		wentDown := false
		for i := 0; ; i++ {
			call := ingest
			if i%3 == 2 {
				call = cancel
			}
			if i%4 == 3 {
				d.proxy.CutBefore(call, 1)
			} else {
				d.proxy.CutAfter(call, 1)
			}
			time.Sleep(15 * time.Millisecond) // the fault's pace
			if i%12 == 11 {
				d.proxy.ResetAll()
			}
			mu.Lock()
			n := len(history)
			mu.Unlock()
			if !wentDown && n >= clients*opsEach/3 {
				// Once, Redis away for longer than the client sends a call
				// again: answers whose outcome is unknown, or refused.
				wentDown = true
				d.proxy.SetDown(true)
				time.Sleep(4 * time.Second)
				d.proxy.SetDown(false)
			}
			if n >= clients*opsEach {
				d.proxy.CutAfter(nil, 0)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 5))
			for range opsEach {
				in := dropOp{key: fmt.Sprintf("drop-%d", rng.IntN(keys))}
				mu.Lock()
				ids := seen[in.key]
				mu.Unlock()
				if len(ids) > 0 && rng.IntN(3) == 0 {
					in.cancel, in.id = true, ids[len(ids)-1-rng.IntN(min(len(ids), 2))] // mostly the newest
				}
				call := time.Since(start).Nanoseconds()
				out := d.dropCall(in)
				ret := time.Since(start).Nanoseconds()
				if out.out == "unknown" {
					ret = math.MaxInt64 // it may take effect at any time after its call
				}
				mu.Lock()
				if out.id != "" && !in.cancel && !slices.Contains(seen[in.key], out.id) {
					seen[in.key] = append(seen[in.key], out.id)
				}
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	<-done
	require.Positive(t, d.proxy.Cuts(), "no reply was lost: the test tested nothing")
	counts := map[string]int{}
	for _, op := range history {
		o := op.Output.(dropOut)
		if op.Input.(dropOp).cancel {
			counts["cancel_"+o.out]++
		} else {
			counts[o.out]++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(dropModel.ToModel(), history, time.Minute)
	if res != porcupine.Ok {
		file := filepath.Join(os.TempDir(), fmt.Sprintf("dtq-dedup-linearizability-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(dropModel.ToModel(), info, file); err == nil {
			t.Logf("visualization of the history: %s", file)
		}
	}
	line := fmt.Sprintf("FAULT dedup_drop_linearizable: ops=%d cuts=%d created=%d collapsed=%d unknown=%d not_written=%d cancels=%d cancel_unknown=%d result=%s",
		len(history), d.proxy.Cuts(), counts["created"], counts["collapsed"], counts["unknown"], counts["not_written"],
		counts["cancel_done"], counts["cancel_unknown"], res)
	fmt.Println(line)
	t.Log(line)
	require.Equal(t, porcupine.Ok, res, "the history of drop submissions and cancels is not linearizable")
	require.Positive(t, counts["collapsed"], "no submission collapsed")
	require.Positive(t, counts["created"], "no submission created")

	// And Redis agrees: at most one live task per key, no record naming an
	// ended task.
	ctx := context.Background()
	liveByKey := map[string]int{}
	for _, ti := range d.tasks(t) {
		if !terminal(ti.Status) {
			liveByKey[ti.DedupKey]++
		}
	}
	for k, n := range liveByKey {
		require.Equal(t, 1, n, "live tasks of key %s", k)
	}
	for k := range keys {
		dk := d.keys.Dedup(queue, fmt.Sprintf("drop-%d", k))
		id, err := d.direct.HGet(ctx, dk, "id").Result()
		if err == redis.Nil {
			continue
		}
		require.NoError(t, err)
		ti, err := d.insp.GetTask(ctx, id)
		require.NoError(t, err)
		require.False(t, terminal(ti.Status), "record %s names ended task %s", dk, id)
	}
}
