package rdb

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/cursor"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestHashSlot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key  string
		want int
	}{
		{"foo", 12182},
		{"somekey", 11058},
		{"foo{hash_tag}", 2515},
		{"bar{hash_tag}", 2515},
		{"", 0},
		// No closing brace, or an empty tag: the whole key is hashed.
		{"{", int(crc16("{") % 16384)},
		{"{}", int(crc16("{}") % 16384)},
		{"foo{}{bar}", int(crc16("foo{}{bar}") % 16384)},
		{"foo{bar", int(crc16("foo{bar") % 16384)},
		{"}foo{", int(crc16("}foo{") % 16384)},
		// Only the first '{' and the first '}' after it count.
		{"foo{{bar}}zap", int(crc16("{bar") % 16384)},
		{"foo{bar}{zap}", int(crc16("bar") % 16384)},
		{"{user1000}.following", int(crc16("user1000") % 16384)},
	}
	for _, c := range cases {
		require.Equal(t, c.want, HashSlot(c.key), "HashSlot(%q)", c.key)
	}
	require.Equal(t, HashSlot("{user1000}.following"), HashSlot("{user1000}.followers"))
	require.Equal(t, uint16(0x31c3), crc16("123456789"), "CRC-16/XMODEM check value")
}

// TestHashSlotMatchesRedis compares HashSlot with CLUSTER KEYSLOT of a
// cluster-enabled redis-server, for hand-picked and random keys.
func TestHashSlotMatchesRedis(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start("--cluster-enabled", "yes")
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c := srv.Client(t)
	ctx := context.Background()

	keys := []string{"foo", "{", "{}", "}{", "{{}}", "a{b}c", "foo{}{bar}", "foo{{bar}}zap",
		"dtq:task:{emails}:0190a5c4e2c07000800000000000000a", "dtq:queues", "\xff\x00{\x80}"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab{}:\x00\xff"
	for range 2000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.ClusterKeySlot(ctx, k)
	}
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	for i, k := range keys {
		require.EqualValues(t, cmds[i].Val(), HashSlot(k), "key %q", k)
	}
}

// errorRecorder is a testing.TB that keeps Errorf calls instead of failing.
type errorRecorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *errorRecorder) Helper() {}

func (r *errorRecorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// TestSlotCheckerCatchesCrossSlotCalls proves the checker is not silent: a
// script call whose keys live in two slots is reported, alone, in a pipeline
// and in a transaction, with EVAL and EVALSHA alike.
func TestSlotCheckerCatchesCrossSlotCalls(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rec := &errorRecorder{TB: t}
	sc := redistest.CheckSlots(rec, s.Client, HashSlot)
	ctx := context.Background()
	p := s.Prefix
	same := []string{p + ":a:{q}", p + ":b:{q}"}
	cross := []string{p + ":a:{q}", p + ":b:{other}"}
	script := redis.NewScript("return #KEYS")

	require.NoError(t, script.Run(ctx, s.Client, same).Err())
	require.Empty(t, rec.errors())
	require.Empty(t, sc.Violations())
	base := len(sc.Calls()) // EVALSHA, plus EVAL when the script was not cached

	require.NoError(t, s.Client.Eval(ctx, "return #KEYS", cross).Err())
	require.Len(t, rec.errors(), 1)
	require.Contains(t, rec.errors()[0], "2 Cluster slots")

	_ = s.Client.EvalSha(ctx, script.Hash(), cross).Err()
	require.Len(t, rec.errors(), 2)

	pipe := s.Client.Pipeline()
	pipe.Eval(ctx, "return 1", same)
	pipe.Eval(ctx, "return 1", cross)
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	require.Len(t, rec.errors(), 3)

	_, err = s.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Eval(ctx, "return 1", cross)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, rec.errors(), 4)

	// Commands that are not scripts are never checked.
	require.NoError(t, s.Client.MSet(ctx, cross[0], 1, cross[1], 2).Err())
	require.Len(t, rec.errors(), 4)

	v := sc.Violations()
	require.Len(t, v, 4)
	require.Equal(t, cross, v[0].Keys)
	require.Equal(t, "eval", v[0].Command)
	require.Equal(t, "evalsha", v[1].Command)
	require.Len(t, sc.Calls(), base+5)
}

// globalScripts touch only global keys (no queue tag).
var globalScripts = map[string]bool{
	"register_queue": true, "partition_queue": true, "worker_start": true, "worker_beat": true, "remote_beat": true,
	"worker_admit": true, "worker_forget": true,
	"op_claim": true, "op_finish": true, "audit": true, "unregister_queue": true, "lease_secret": true,
	"schedule_put": true, "schedule_delete": true, "schedule_pause": true, "schedule_record": true,
	// a workflow's own slot, or the global workflow indexes
	"wf_create": true, "wf_start": true, "wf_apply": true, "wf_released": true, "wf_add": true, "wf_cancel": true,
	"wf_note": true, "wf_mark": true, "wf_unmark": true, "wf_unlist": true, "wf_park": true,
}

// exerciseScripts drives every script of lua/ through the RDB method that
// runs it, on queue "emails". A new script must be added here; the test
// below fails for any script this never runs.
func exerciseScripts(t *testing.T, r *RDB) {
	ctx := context.Background()
	now := time.Now()
	opt := IngestOptions{MaxDepth: 100, EventsMaxLen: 1000, RecentCap: 1000}
	ws := &WorkerSettings{WorkerID: "w1", Lease: 30 * time.Second, EventsMaxLen: 1000,
		SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 100}
	fenceOK := func(err error) {
		t.Helper()
		if !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrCancelWon) {
			require.NoError(t, err)
		}
	}

	for _, q := range []string{"emails", "reports", "emails"} {
		_, err := r.QueueNumber(ctx, q)
		require.NoError(t, err)
	}
	num, err := r.QueueNumber(ctx, "emails")
	require.NoError(t, err)
	task := func(key string, delay time.Duration, expires bool) NewTask {
		nt := testTask(num, now, key)
		nt.AvailableAt = now.Add(delay).UnixMilli()
		if expires {
			nt.ExpiresAt = now.Add(delay + time.Hour).UnixMilli()
		}
		return nt
	}

	// Ingest: one task, then a batch mixing every shape ingest knows.
	_, err = r.Ingest(ctx, "emails", now, opt, []NewTask{task("", 0, false)})
	require.NoError(t, err)
	batch := []NewTask{
		task("k1", 0, false), task("k1", 0, false), task("k2", time.Minute, true),
		task("", 0, true), task("", time.Hour, false),
	}
	batch[1].Fingerprint = "other"
	res, err := r.Ingest(ctx, "emails", now, opt, batch)
	require.NoError(t, err)
	require.Equal(t, []IngestOutcome{Created, Mismatch, Created, Created, Created}, outcomes(res))
	pendingKeyed, pendingPlain := res[2].TaskID, res[4].TaskID
	// A replay of a finished task reads its hash and result key.
	markRecord(t, r, "emails", "k1", "completed")
	require.NoError(t, r.c.Set(ctx, r.keys.Result("emails", res[0].TaskID), `{"ok":true}`, time.Hour).Err())
	res, err = r.Ingest(ctx, "emails", now, opt, []NewTask{task("k1", 0, false), task("k2", time.Minute, true)})
	require.NoError(t, err)
	require.Equal(t, []IngestOutcome{Duplicate, InProgress}, outcomes(res))
	markRecord(t, r, "emails", "k1", "processing") // queued again, for the claim below
	_, err = r.Ingest(ctx, "emails", now, IngestOptions{MaxDepth: 1, EventsMaxLen: 10, RecentCap: 10}, []NewTask{task("", 0, false)})
	require.NoError(t, err)

	// Worker side: claim, the finalize scripts, renewal, reclaim.
	require.NoError(t, r.EnsureGroups(ctx, "emails"))
	claim := func(at time.Time) []ClaimedTask {
		t.Helper()
		cr, err := r.Claim(ctx, "emails", ws, 10, at, "n1")
		require.NoError(t, err)
		return cr.Tasks
	}
	finish := func(c ClaimedTask, at time.Time) *FinishArgs {
		return &FinishArgs{Queue: "emails", ID: c.ID, Attempt: c.Attempt, Priority: c.Priority, Now: at}
	}
	got := claim(now)
	require.NotEmpty(t, got)
	errs, err := r.FinishSucceeded(ctx, "emails", ws, now, []Success{{ID: got[0].ID, Attempt: got[0].Attempt, Result: []byte(`{"ok":true}`)}})
	require.NoError(t, err)
	fenceOK(errs[0])
	if len(got) > 1 {
		fenceOK(r.FinishRetry(ctx, finish(got[1], now), ws, time.Second, "Boom", "try again"))
	}
	if len(got) > 2 {
		fenceOK(r.FinishDead(ctx, finish(got[2], now), ws, "Permanent", "no", false))
	}
	_, err = r.Ingest(ctx, "emails", now, opt, []NewTask{task("", 0, false), task("k3", 0, false), task("", 0, false)})
	require.NoError(t, err)
	got = claim(now)
	require.Len(t, got, 3)
	refs := []LeaseRef{{got[0].ID, got[0].Attempt}, {got[1].ID, got[1].Attempt}}
	_, err = r.RenewLeases(ctx, "emails", ws, now, refs)
	require.NoError(t, err)
	// Progress and log lines of a running attempt, then a page of them.
	_, err = r.WriteProgress(ctx, ws, now, &ProgressWrite{Queue: "emails", ID: got[1].ID, Attempt: got[1].Attempt, Seq: 1,
		Progress: []byte("50"), Lines: []LogEntry{{TS: now, Line: "half way"}}}, DefaultLogCaps)
	require.NoError(t, err)
	_, err = r.TaskLogs(ctx, got[1].ID, 0, "", 10)
	require.NoError(t, err)
	as := &AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true, AuditMaxLen: 100}
	_, _, err = r.CancelTask(ctx, "emails", got[0].ID, as, now, "test") // running: a cancel request
	require.NoError(t, err)
	fenceOK(r.FinishRetry(ctx, finish(got[0], now), ws, time.Second, "Boom", "stopped")) // the cancel wins
	fenceOK(r.HandBack(ctx, finish(got[1], now), ws))
	_, err = r.Reclaim(ctx, "emails", ws, 10, now.Add(time.Hour), "n2", []LeaseRef{{got[2].ID, got[2].Attempt}})
	require.NoError(t, err)

	// Admin operations.
	_, _, err = r.RunNow(ctx, "emails", pendingKeyed, as, now)
	require.NoError(t, err)
	_, _, err = r.CancelTask(ctx, "emails", pendingPlain, as, now, "test")
	require.NoError(t, err)
	_, _, err = r.CancelTask(ctx, "emails", got[2].ID, as, now, "test") // running: a cancel request
	require.NoError(t, err)
	_, err = r.DLQRequeue(ctx, "emails", got[0].ID, as, now, now.Add(time.Hour))
	require.NoError(t, err)
	_, err = r.DLQDiscard(ctx, "emails", got[0].ID, as, now)
	require.NoError(t, err)
	for _, action := range []string{"requeue", "discard"} {
		_, _, _, err = r.DLQBulk(ctx, "emails", action, 0, "", "", as, now)
		require.NoError(t, err)
	}
	_, _, err = r.DeleteTask(ctx, "emails", pendingPlain, now)
	require.NoError(t, err)
	_, err = r.SetPaused(ctx, "emails", true, as, now, "admin")
	require.NoError(t, err)
	_, err = r.SetPaused(ctx, "emails", false, as, now, "admin")
	require.NoError(t, err)
	_, err = r.PurgeQueue(ctx, "emails", as, now)
	require.NoError(t, err)
	_, _, err = r.Recount(ctx, "emails")
	require.NoError(t, err)
	_, err = r.Tidy(ctx, "emails", now.Add(2*time.Hour), now)
	require.NoError(t, err)
	_, err = r.ListTasks(ctx, &dtqtype.TaskListParams{Queue: "emails", Limit: 2, Cursor: cursor.Encode(cursor.Tasks, pendingPlain)})
	require.NoError(t, err)
	require.NoError(t, r.AppendAudit(ctx, as.AuditMaxLen, []any{"actor", "admin", "action", "pause", "target", "emails"}))
	_, err = r.LeaseSecret(ctx, "offered")
	require.NoError(t, err)

	// Flow control.
	_, err = r.SetLimits(ctx, "emails", &dtqtype.QueueLimits{Rate: &dtqtype.RateLimit{Limit: 5, Period: dtqtype.Duration(time.Second)}, Concurrency: 2, KeyConcurrency: 1})
	require.NoError(t, err)
	_, err = r.SetLimits(ctx, "emails", nil)
	require.NoError(t, err)

	// Maintenance.
	_, err = r.Promote(ctx, "emails", ws, now.Add(2*time.Hour))
	require.NoError(t, err)
	_, err = r.SweepExpired(ctx, "emails", ws, now.Add(3*time.Hour))
	require.NoError(t, err)
	_, err = r.PruneConsumers(ctx, "emails", time.Hour)
	require.NoError(t, err)

	// Global scripts: worker heartbeats and handler-level operations.
	require.NoError(t, r.WorkerStart(ctx, "w1", now, time.Minute, 1000, []any{"instance", "i1", "status", "running"}))
	require.NoError(t, r.WorkerBeat(ctx, "w1", "i1", now, 1000, false, []any{"status", "running"}))
	require.NoError(t, r.RemoteWorkerBeat(ctx, &RemoteWorker{ID: "h1", Mode: RemoteClaim, LeaseEnd: now.Add(time.Minute),
		Queues: []string{"emails"}, Interval: 10 * time.Second, TaskIDs: []string{"t1"}, EventsMax: 1000}, now))
	// A full index evicts silent workers (worker_forget deletes their records).
	r.SetWorkerBounds(WorkerBounds{Max: 2, MaxPerKey: 1})
	require.NoError(t, r.RemoteWorkerBeat(ctx, &RemoteWorker{ID: "h2", Key: "py", Mode: RemoteClaim,
		LeaseEnd: now.Add(3 * time.Hour), Interval: 10 * time.Second, EventsMax: 1000}, now.Add(2*time.Hour)))
	r.SetWorkerBounds(WorkerBounds{})
	state, _, err := r.OpClaim(ctx, "receipt:1", "tok", time.Second)
	require.NoError(t, err)
	require.Equal(t, "claimed", state)
	_, err = r.OpFinish(ctx, "receipt:1", "tok", "done", time.Hour, []byte(`{"sent":true}`))
	require.NoError(t, err)

	// Global scripts: schedules.
	next := now.Add(time.Minute).UnixMilli()
	_, _, _, err = r.PutSchedule(ctx, "nightly", now, next, []any{"spec", "@every 1m", "queue", "emails"})
	require.NoError(t, err)
	_, err = r.RecordSchedule(ctx, now, ScheduleRun{Name: "nightly", Tick: next, NextRun: next + 60000, Version: "1", TaskID: "t1"})
	require.NoError(t, err)
	_, err = r.RecordSchedule(ctx, now, ScheduleRun{Name: "nightly", TaskID: "t2"})
	require.NoError(t, err)
	_, err = r.SetSchedulePaused(ctx, "nightly", true, now, 0)
	require.NoError(t, err)
	_, err = r.SetSchedulePaused(ctx, "nightly", false, now, next)
	require.NoError(t, err)
	_, err = r.DeleteSchedule(ctx, "nightly")
	require.NoError(t, err)

	exerciseWorkflowScripts(t, r)

	// A queue that holds tasks is refused; an empty one is deleted.
	del, err := r.DeleteQueue(ctx, "emails")
	require.NoError(t, err)
	require.False(t, del.Deleted)
	_, err = r.QueueNumber(ctx, "emails-empty")
	require.NoError(t, err)
	del, err = r.DeleteQueue(ctx, "emails-empty")
	require.NoError(t, err)
	require.True(t, del.Deleted)

	// A partitioned queue's map (its partitions run the per-queue scripts
	// under their own tags: the root suite's strict mode checks those).
	pcreated, parts, err := r.PartitionQueue(ctx, "hot", 3)
	require.NoError(t, err)
	require.True(t, pcreated)
	require.Len(t, parts, 3)
}

// TestEveryScriptStaysInOneSlot runs every script against a fresh server (so
// both the EVALSHA attempt and the EVAL fallback pass the hook) and checks
// that no call spans two Cluster slots, that every key and key prefix starts
// with the key prefix, and that queue scripts stay inside the queue's tag.
func TestEveryScriptStaysInOneSlot(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c := srv.Client(t)
	sc := redistest.CheckSlots(t, c, HashSlot) // fails the test on any cross-slot call
	const prefix = "slots"
	exerciseScripts(t, New(c, prefix))
	require.Empty(t, sc.Violations())

	seen := map[string]bool{}
	for _, call := range sc.Calls() {
		name := scriptName(call.Script)
		require.NotEmpty(t, name, "a script call that is not one of lua/")
		seen[name] = true
		seen[call.Command] = true
		// Key prefixes passed in ARGV are keys too: scripts append ids to them.
		keys := slices.Clone(call.Keys)
		for _, a := range call.Args {
			if strings.HasPrefix(a, prefix+":") {
				keys = append(keys, a)
			}
		}
		for _, k := range keys {
			require.True(t, strings.HasPrefix(k, prefix+":"), "%s key %q lacks the prefix", name, k)
		}
		if globalScripts[name] {
			continue
		}
		tag := "{emails}"
		if name == "delete_queue" && len(keys) > 0 && strings.Contains(keys[0], ":{emails-empty}") {
			tag = "{emails-empty}" // the queue deleted at the end, which must be empty
		}
		for _, k := range keys {
			require.Contains(t, k, ":"+tag, "%s key %q lacks the queue tag", name, k)
			require.Equal(t, HashSlot(tag), HashSlot(k), "%s key %q", name, k)
		}
	}
	for name := range scripts {
		if !seen[name] {
			t.Errorf("script %s.lua is never run by exerciseScripts: its keys are not checked", name)
		}
	}
	require.True(t, seen["eval"], "the EVAL fallback was never checked")
	require.True(t, seen["evalsha"], "EVALSHA was never checked")

	for _, call := range sc.Calls() {
		switch scriptName(call.Script) {
		case "register_queue", "unregister_queue", "partition_queue":
			require.Equal(t, []string{prefix + ":queues"}, call.Keys)
		case "op_claim", "op_finish":
			require.Equal(t, []string{prefix + ":op:receipt:1"}, call.Keys)
		case "audit":
			require.Equal(t, []string{prefix + ":audit"}, call.Keys)
		case "lease_secret":
			require.Equal(t, []string{prefix + ":lease_secret"}, call.Keys)
		case "worker_start", "worker_beat":
			require.Equal(t, []string{prefix + ":worker:w1"}, call.Keys)
		case "schedule_put", "schedule_delete", "schedule_pause", "schedule_record":
			for _, k := range call.Keys {
				require.Contains(t, k, ":{_schedules}:", "%s key %q", scriptName(call.Script), k)
			}
		case "remote_beat":
			require.Contains(t, []string{prefix + ":worker:h1", prefix + ":worker:h2"}, call.Keys[0])
		case "worker_admit":
			require.Equal(t, prefix+":workers", call.Keys[0])
			if len(call.Keys) > 1 {
				require.Equal(t, []string{prefix + ":workers", NewKeys(prefix).WorkersOfKey("py")}, call.Keys)
			}
		}
	}
}

// scriptName maps the script of an EVALSHA (its SHA1) or an EVAL (its
// source) to the script's file name, "" when it is none of lua/.
func scriptName(s string) string {
	sum := sha1.Sum([]byte(s))
	srcHash := hex.EncodeToString(sum[:])
	for name, sc := range scripts {
		if s == sc.Hash() || srcHash == sc.Hash() {
			return name
		}
	}
	return ""
}

func outcomes(res []IngestResult) []IngestOutcome {
	out := make([]IngestOutcome, len(res))
	for i, r := range res {
		out[i] = r.Outcome
	}
	return out
}

// markRecord puts the task an idempotency record names in the state the
// record answers with: "completed" (succeeded), "failed" or "processing"
// (queued). The record is the task id; its state is the task's status.
func markRecord(t *testing.T, r *RDB, queue, key, state string) {
	t.Helper()
	ctx := context.Background()
	owner, err := r.c.Get(ctx, r.keys.Idempotency(queue, key)).Result()
	require.NoError(t, err)
	status := map[string]string{"completed": "succeeded", "failed": "failed", "processing": "queued"}[state]
	require.NotEmpty(t, status, state)
	require.NoError(t, r.c.HSet(ctx, r.keys.Task(queue, owner), "status", status).Err())
}
