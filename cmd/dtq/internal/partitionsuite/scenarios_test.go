package partitionsuite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/rdb"
)

// randomFor is how long TestRandomFaults injects faults: 1 minute in make
// test (half on each deployment; the suite runs alone, as the dashboard's
// browser tests cannot run beside it, and make test stays under 20
// minutes), 10 in make test-partitions (-partitions.random=10m, or the
// environment variable DTQ_PARTITIONS_RANDOM).
var randomFor = flag.Duration("partitions.random", time.Minute, "how long TestRandomFaults injects faults")

// randomSeed picks TestRandomFaults' seed (0: from the clock; the seed is
// printed either way).
var randomSeed = flag.Uint64("partitions.seed", 0, "TestRandomFaults' seed (0: from the clock)")

const clients = 6

// waitLoad waits until the producers have n keys acknowledged.
func (w *world) waitLoad(n int) {
	eventually(w.t, 60*time.Second, "the load never got going", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.acked) >= n
	})
}

// agreedMaster returns the master address every Sentinel names ("" while
// they disagree or one does not answer).
func (w *world) agreedMaster() string {
	var agreed string
	for _, s := range w.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.addr, DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second})
		addr, err := sc.GetMasterAddrByName(context.Background(), "m").Result()
		sc.Close()
		if err != nil || len(addr) != 2 {
			return ""
		}
		a := addr[0] + ":" + addr[1]
		if agreed != "" && a != agreed {
			return ""
		}
		agreed = a
	}
	return agreed
}

// hostOf returns the host whose Redis node is at addr.
func (w *world) hostOf(addr string) string {
	for h, n := range w.redis {
		if n.addr == addr {
			return h
		}
	}
	w.t.Fatalf("no node at %s", addr)
	return ""
}

// sentinelStable waits until the Sentinels agree on a master that answers
// as one, with both replicas' links up.
func (w *world) sentinelStable(within time.Duration) {
	eventually(w.t, within, "the Sentinel deployment never settled (one agreed master, both replicas linked)", func() bool {
		m := w.agreedMaster()
		if m == "" {
			return false
		}
		repl := info(m, "replication")
		return strings.Contains(repl, "role:master") && strings.Contains(repl, "connected_slaves:2")
	})
}

func (w *world) sentinelHosts() []string { return []string{"s1", "s2", "s3"} }

// TestSentinelIsolatedMaster: the Sentinel master is cut off from its
// replicas and Sentinels while the API servers and workers still reach it;
// DTQ_REPLICA_ACKS=1. Writes to the old master are refused or time out (no
// replica acknowledges them), the Sentinels promote a replica, the old
// master rejoins as a replica of the new one: nothing acknowledged is lost
// and every answer was true.
func TestSentinelIsolatedMaster(t *testing.T) {
	w := sentinelWorld(t, "sentinel-isolated-master")
	w.startAPI("api1")
	w.startAPI("api2")
	w.startWorker("w1")
	w.startWorker("w2")
	w.startClients(clients, 1)
	w.waitLoad(30)

	old := w.hostOf(w.agreedMaster())
	cut := append([]string{}, w.sentinelHosts()...)
	for h := range w.redis {
		if h != old {
			cut = append(cut, h)
		}
	}
	began := time.Now()
	w.fault("isolate master " + old + " from " + strings.Join(cut, ","))
	w.net.partition([]string{old}, cut)
	var promoted time.Duration
	eventually(t, 60*time.Second, "no replica was promoted", func() bool {
		m := w.agreedMaster()
		if m != "" && w.hostOf(m) != old {
			promoted = time.Since(began)
			return true
		}
		return false
	})
	time.Sleep(3 * time.Second) // the clients keep going against both sides
	w.net.heal()
	w.sentinelStable(60 * time.Second)
	eventually(t, 60*time.Second, "the old master never rejoined as a replica", func() bool {
		return role(w.redis[old].addr) == "slave" && strings.Contains(info(w.redis[old].addr, "replication"), "master_link_status:up")
	})
	rejoined := time.Since(began)
	w.blindFor(began, time.Now().Add(time.Second))
	w.healed()
	time.Sleep(time.Second) // load on the healed deployment
	w.check(fmt.Sprintf(" promoted_in=%s rejoined_in=%s", promoted.Round(10*time.Millisecond), rejoined.Round(10*time.Millisecond)))
}

// TestClusterIsolatedMaster: the Cluster master of the queue's slot is cut
// off from every other node, with an API server and a worker on its side
// and another pair on the majority's; its replica is promoted, the old
// master rejoins as a replica. Producers use both API servers.
func TestClusterIsolatedMaster(t *testing.T) {
	w := clusterWorld(t, "cluster-isolated-master")
	w.startAPI("api1")
	w.startAPI("api2")
	w.startWorker("w1")
	w.startWorker("w2")
	w.startClients(clients, 2)
	w.waitLoad(30)

	slotKey := rdb.NewKeys(w.prefix).Depth(queue)
	cc := w.obs.(*redis.ClusterClient)
	var old string
	eventually(t, 30*time.Second, "no master found for the queue's slot", func() bool {
		m, err := cc.MasterForKey(context.Background(), slotKey)
		if err != nil {
			return false
		}
		old = w.hostOf(m.Options().Addr)
		return true
	})
	minority := []string{old, "api1", "w1"}
	majority := w.net.others(minority...)
	began := time.Now()
	w.fault("isolate Cluster master " + old + " (with api1, w1) from " + strings.Join(majority, ","))
	w.net.partition(minority, majority)
	var promoted time.Duration
	eventually(t, 60*time.Second, "the isolated master's replica was never promoted", func() bool {
		for h, n := range w.redis {
			if h == old {
				continue
			}
			if role(n.addr) == "master" && len(w.redis) > 0 && masterCount(w, old) == 3 {
				promoted = time.Since(began)
				return true
			}
		}
		return false
	})
	time.Sleep(3 * time.Second) // producers on both sides go on
	w.net.heal()
	eventually(t, 90*time.Second, "the cluster never healed with the old master as a replica", func() bool {
		return role(w.redis[old].addr) == "slave" && w.clusterHealthy()
	})
	rejoined := time.Since(began)
	w.blindFor(began, time.Now().Add(time.Second))
	w.healed()
	time.Sleep(time.Second)
	w.check(fmt.Sprintf(" promoted_in=%s rejoined_in=%s", promoted.Round(10*time.Millisecond), rejoined.Round(10*time.Millisecond)))
}

// masterCount counts the nodes other than except that answer as masters.
func masterCount(w *world, except string) int {
	n := 0
	for h, node := range w.redis {
		if h != except && role(node.addr) == "master" {
			n++
		}
	}
	return n
}

// submitOne submits one task with key through the API on host api until
// acknowledged, and returns its id.
func (w *world) submitOne(api, key string, ms int) string {
	body, _ := json.Marshal(map[string]any{"task_type": taskType, "queue": queue, "idempotency_key": key,
		"payload": workPayload{Key: key, MS: ms}})
	var id string
	eventually(w.t, 30*time.Second, "submission of "+key+" never acknowledged", func() bool {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Post("http://"+w.net.h(api).ip+":"+apiPort+"/api/v1/tasks",
			"application/json", bytes.NewReader(body))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var out struct {
			TaskID string `json:"task_id"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		id = out.TaskID
		return resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK
	})
	w.mu.Lock()
	w.acked[key], w.seen[id] = id, key
	w.mu.Unlock()
	return id
}

// runsOf returns the handler runs of task id so far.
func (w *world) runsOf(id string) []handlerRun {
	var out []handlerRun
	for _, r := range w.runs() {
		if r.task == id {
			out = append(out, r)
		}
	}
	return out
}

// TestWorkerCutOffPastLease: a worker running a long task is cut off from
// Redis (every Redis and Sentinel host) past its lease: its handler is
// cancelled (lease lost) before the lease runs out, the task is reclaimed
// and run by the other worker, and the cut worker writes nothing for it.
func TestWorkerCutOffPastLease(t *testing.T) {
	w := sentinelWorld(t, "worker-cut-off")
	w.startAPI("api1")
	w.startWorker("w1")
	long := w.submitOne("api1", "long-task", 8000)
	eventually(t, 30*time.Second, "w1 never started the long task", func() bool { return len(w.runsOf(long)) == 1 })
	w.startWorker("w2")
	w.startClients(clients, 3)
	w.waitLoad(20)

	began := time.Now()
	w.fault("cut w1 off from every Redis and Sentinel host")
	w.net.partition([]string{"w1"}, []string{"r1", "r2", "r3", "s1", "s2", "s3"})
	var cancelled, rerun handlerRun
	eventually(t, 60*time.Second, "the long task was never run again elsewhere", func() bool {
		for _, r := range w.runsOf(long) {
			switch {
			case r.worker == "w1" && r.cause != "":
				cancelled = r
			case r.worker == "w2":
				rerun = r
			}
		}
		return cancelled.cause != "" && rerun.worker != ""
	})
	time.Sleep(2 * time.Second) // w1 stays cut off while w2 runs the task
	w.net.heal()
	w.healed()
	time.Sleep(2 * time.Second)
	w.check(fmt.Sprintf(" cut_handler=%s cut_handler_ended_after=%s rerun_started_after=%s",
		cancelled.cause, time.Duration(cancelled.end-began.UnixNano()).Round(10*time.Millisecond),
		time.Duration(rerun.start-began.UnixNano()).Round(10*time.Millisecond)))
	if cancelled.cause != "lease_lost" {
		t.Errorf("the cut worker's handler ended %q, want lease_lost", cancelled.cause)
	}
	if rerun.start < cancelled.end {
		t.Errorf("the task ran again before the cut handler ended")
	}
	ti, err := w.insp.GetTask(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ti.Result), `"worker":"w2"`) {
		t.Errorf("the long task's result is %s, want w2's", ti.Result)
	}
}

// TestAPICutOffMidSubmit: an API server is cut off from Redis while its
// producers submit, cancel and read through it: every answer it gave is
// true (an unknown outcome is answered as unknown, never as a failure),
// which the history check shows.
func TestAPICutOffMidSubmit(t *testing.T) {
	w := sentinelWorld(t, "api-cut-off")
	w.startAPI("api1")
	w.startAPI("api2")
	w.startWorker("w1")
	w.startWorker("w2")
	w.startClients(clients, 4)
	w.waitLoad(30)
	began := time.Now()
	w.fault("cut api1 off from every Redis and Sentinel host")
	w.net.partition([]string{"api1"}, []string{"r1", "r2", "r3", "s1", "s2", "s3"})
	time.Sleep(10 * time.Second) // the cut: calls in flight when it began, and new ones
	w.net.heal()
	healed := time.Now()
	w.healed()
	time.Sleep(time.Second)
	w.check(" api1_during_cut: " + w.callsThrough("api1", began, healed))
}

// TestRandomFaults injects faults chosen at random (seeded; the seed is
// printed) one after another, for -partitions.random (1 minute by
// default): half the time on a Sentinel deployment, half on a Cluster.
// The faults: a master cut off from its replicas (and Sentinels), a
// worker or an API server cut off from Redis, one-way partitions between
// any two hosts, slow and lossy links, pauses and kills of workers and
// kills of replicas.
func TestRandomFaults(t *testing.T) {
	d := *randomFor
	if v := os.Getenv("DTQ_PARTITIONS_RANDOM"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("DTQ_PARTITIONS_RANDOM=%s: %v", v, err)
		}
	}
	seed := *randomSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	if v := os.Getenv("DTQ_PARTITIONS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("TestRandomFaults seed=%d duration=%s (rerun with -partitions.seed=%d)", seed, d, seed)
	t.Run("sentinel", func(t *testing.T) {
		randomFaults(sentinelWorld(t, "random-sentinel"), seed, d/2)
	})
	t.Run("cluster", func(t *testing.T) {
		randomFaults(clusterWorld(t, "random-cluster"), seed+1, d/2)
	})
}

// randomFaults runs w's load and injects random faults for d.
func randomFaults(w *world, seed uint64, d time.Duration) {
	t := w.t
	rng := rand.New(rand.NewPCG(seed, 47))
	w.startAPI("api1")
	w.startAPI("api2")
	w.startWorker("w1")
	w.startWorker("w2")
	w.startClients(clients, seed)
	w.waitLoad(20)
	end := time.Now().Add(d)
	redisHosts := slices.Sorted(maps.Keys(w.redis))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	hold := func() time.Duration { return time.Duration(2000+rng.IntN(4000)) * time.Millisecond }
	// What a worker or API server is cut off from: every Redis host and
	// Sentinel.
	backends := append(slices.Clone(redisHosts), w.sentinelHosts()...)
	if w.kind == "cluster" {
		backends = redisHosts
	}
	withRole := func(r string) []string {
		var out []string
		for _, h := range redisHosts {
			if role(w.redis[h].addr) == r {
				out = append(out, h)
			}
		}
		return out
	}
	stable := func() {
		if w.kind == "cluster" {
			eventually(t, 90*time.Second, "the cluster never healed", w.clusterHealthy)
			return
		}
		w.sentinelStable(90 * time.Second)
	}
	linkFault := "none injected"
	for time.Now().Before(end) {
		began := time.Now()
		blind := false
		switch rng.IntN(8) {
		case 0:
			if w.kind == "cluster" {
				m := pick(withRole("master"))
				minority := []string{m, pick([]string{"api1", "api2"}), pick([]string{"w1", "w2"})}
				w.fault("isolate Cluster master " + m + " with " + strings.Join(minority[1:], ","))
				w.net.partition(minority, w.net.others(minority...))
				time.Sleep(hold() + clusterNodeTimeout + 2*time.Second)
			} else {
				m := w.hostOf(w.agreedMaster())
				w.fault("isolate master " + m + " from its replicas and Sentinels")
				w.net.partition([]string{m}, append(w.sentinelHosts(), otherThan(redisHosts, m)...))
				time.Sleep(hold() + 3*time.Second)
			}
			blind = true
		case 1:
			h := pick([]string{"w1", "w2"})
			w.fault("cut " + h + " off from Redis")
			w.net.partition([]string{h}, backends)
			time.Sleep(hold() + visibility)
		case 2:
			h := pick([]string{"api1", "api2"})
			w.fault("cut " + h + " off from Redis")
			w.net.partition([]string{h}, backends)
			time.Sleep(hold())
		case 3:
			from, to := pick(w.net.order), pick(w.net.order)
			if from == to {
				continue
			}
			w.fault("one-way partition " + from + " -> " + to)
			w.net.oneWay([]string{from}, []string{to})
			blind = true
			time.Sleep(hold())
		case 4:
			h := pick(w.net.order)
			delay := time.Duration(20+rng.IntN(200)) * time.Millisecond
			loss := rng.IntN(20)
			linkFault = w.net.degrade(h, delay, loss)
			w.fault(fmt.Sprintf("%s on %s: delay %s loss %d%%", linkFault, h, delay, loss))
			blind = slices.Contains(backends, h)
			time.Sleep(hold())
			w.net.restore(h)
		case 5:
			h := pick([]string{"w1", "w2"})
			p := hold() + visibility
			w.fault(fmt.Sprintf("pause %s for %s", h, p))
			w.pauseWorker(h, p)
		case 6:
			h := pick([]string{"w1", "w2"})
			w.fault("kill and restart " + h)
			w.killWorker(h)
			time.Sleep(hold())
			w.workers[h].start(t)
		case 7:
			h := pick(withRole("slave"))
			w.fault("kill and restart replica " + h)
			w.redis[h].kill()
			time.Sleep(hold())
			w.redis[h].start(t)
			waitAnswer(t, w.redis[h].addr)
		}
		w.net.heal()
		stable()
		if blind {
			w.blindFor(began, time.Now().Add(time.Second))
		}
		w.healed()
		time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond) // calm between faults
	}
	w.check(fmt.Sprintf(" seed=%d link_faults=%s", seed, strings.ReplaceAll(linkFault, " ", "_")))
}

func otherThan(s []string, x string) []string {
	var out []string
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}
