package rdb

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// NumBands is the number of priority bands (streams) per queue: p0 … p9.
const NumBands = 10

// Keys builds every Redis key name dtq uses. It is the only place key names
// are spelled out. Every per-queue key carries the queue as a Cluster hash tag
// ({queue}) so that one script touches one slot; global keys carry no tag.
// A Keys from NewKeys remembers the per-queue names of the queues it has
// built keys for, so that the hot paths (a submission's ingest call, a
// worker's claim) build no key strings; copies share what it remembers.
type Keys struct {
	prefix string
	cache  *keyCache // nil: build every name (the zero Keys)
}

// NewKeys returns a key builder for prefix (DTQ_KEY_PREFIX, e.g. "dtq").
// It is safe for concurrent use.
func NewKeys(prefix string) Keys { return Keys{prefix: prefix, cache: &keyCache{}} }

// Prefix returns the key prefix.
func (k Keys) Prefix() string { return k.prefix }

// queueKey is one form of per-queue key name: see queueKeyForms.
type queueKey uint8

// The per-queue key forms.
const (
	streamPrefixKey queueKey = iota
	taskPrefixKey
	resultPrefixKey
	idempotencyPrefixKey
	scheduleKey
	leaseKey
	expiryKey
	depthKey
	recentKey
	retainedKey
	tidyKey
	dlqKey
	eventsKey
	pausedKey
	limitsKey
	rateKey
	keyRunningKey
	keyFreedKey
	keyWaitPrefixKey
	heldKey
	limitedKey
	wakeKey
	fairStateKey
	fairOnKey
	fairKeysKey
	fairDelayKey
	keyRateKey
	fairActivePrefixKey
	keyQueuePrefixKey
	statsPrefixKey
	dedupPrefixKey
	dedupCountsKey
	cancelChannelKey
	queueNumKey
	waitingKey
	workflowOutboxKey
	workflowRelayLockKey
	numQueueKeys
)

// queueKeyForms spells each per-queue key form: "<prefix>:<kind>:{<queue>}"
// and the suffix.
var queueKeyForms = [numQueueKeys]struct{ kind, suffix string }{
	streamPrefixKey:      {"stream", ":p"},
	taskPrefixKey:        {"task", ":"},
	resultPrefixKey:      {"result", ":"},
	idempotencyPrefixKey: {"idempotency", ":"},
	scheduleKey:          {"schedule", ""},
	leaseKey:             {"lease", ""},
	expiryKey:            {"expiry", ""},
	depthKey:             {"depth", ""},
	recentKey:            {"listing", ""},
	retainedKey:          {"retained", ""},
	tidyKey:              {"tidy", ""},
	dlqKey:               {"dlq", ""},
	eventsKey:            {"events", ""},
	pausedKey:            {"paused", ""},
	limitsKey:            {"limits", ""},
	rateKey:              {"rate", ""},
	keyRunningKey:        {"keyrun", ""},
	keyFreedKey:          {"keyfreed", ""},
	keyWaitPrefixKey:     {"keywait", ":"},
	heldKey:              {"held", ""},
	limitedKey:           {"limited", ""},
	wakeKey:              {"wake", ""},
	fairStateKey:         {"fair", ""},
	fairOnKey:            {"fairon", ""},
	fairKeysKey:          {"fairkeys", ""},
	fairDelayKey:         {"fairdelay", ""},
	keyRateKey:           {"keyrate", ""},
	fairActivePrefixKey:  {"fairact", ":p"},
	keyQueuePrefixKey:    {"keyq", ":p"},
	statsPrefixKey:       {"stats", ":"},
	dedupPrefixKey:       {"dedup", ":"},
	dedupCountsKey:       {"dedupn", ""},
	cancelChannelKey:     {"cancel", ""},
	queueNumKey:          {"qnum", ""},
	waitingKey:           {"waiting", ""},
	workflowOutboxKey:    {"wfout", ""},
	workflowRelayLockKey: {"wfrelay", ""},
}

// queueKeyNames are one queue's key names: every form, then the band
// streams, spelled one after the other in one string. The ends are offsets
// rather than strings so that the collector marks one pointer per queue,
// not one per name: a process that knows 1,000 queues (dtq api) keeps its
// garbage collections as short as one that knows one.
type queueKeyNames struct {
	all  string
	ends [numQueueKeys + NumBands]int
}

// name is the i-th name: a form, or NumBands bands after the forms.
func (n *queueKeyNames) name(i int) string {
	start := 0
	if i > 0 {
		start = n.ends[i-1]
	}
	return n.all[start:n.ends[i]]
}

// maxCachedQueues bounds the queues a keyCache remembers, so that names a
// caller makes up (an admin call for a queue that does not exist) cannot
// grow it without end; keys of queues beyond it are built on each call.
const maxCachedQueues = 1024

// keyCache maps a queue to its key names. Readers take no lock: the map is
// never changed once published, an addition publishes a copy.
type keyCache struct {
	mu     sync.Mutex // serialises additions
	queues atomic.Pointer[map[string]*queueKeyNames]
}

// names returns queue's key names, building them on first use; nil when
// the cache is full.
func (k Keys) names(queue string) *queueKeyNames {
	if n, known := k.cache.lookup(queue); n != nil || len(known) >= maxCachedQueues {
		return n
	}
	k.cache.mu.Lock()
	defer k.cache.mu.Unlock()
	n, known := k.cache.lookup(queue) // another call may have added it meanwhile
	if n != nil || len(known) >= maxCachedQueues {
		return n
	}
	n = k.buildNames(queue)
	m := make(map[string]*queueKeyNames, len(known)+1)
	maps.Copy(m, known)
	m[strings.Clone(queue)] = n // the caller's string may be a slice of a larger one
	k.cache.queues.Store(&m)
	return n
}

// lookup returns queue's names from the published map (nil when absent),
// and that map.
func (c *keyCache) lookup(queue string) (*queueKeyNames, map[string]*queueKeyNames) {
	var known map[string]*queueKeyNames
	if m := c.queues.Load(); m != nil {
		known = *m
	}
	return known[queue], known
}

// buildNames spells every key name of queue; their text is one string.
func (k Keys) buildNames(queue string) *queueKeyNames {
	size := 0
	for _, f := range queueKeyForms {
		size += len(k.prefix) + len(f.kind) + len(queue) + len(f.suffix) + 4
	}
	stream := queueKeyForms[streamPrefixKey]
	size += NumBands * (len(k.prefix) + len(stream.kind) + len(queue) + len(stream.suffix) + 5)
	var b strings.Builder
	b.Grow(size)
	n := &queueKeyNames{}
	for i, f := range queueKeyForms {
		k.writeQueueKey(&b, f.kind, queue, f.suffix)
		n.ends[i] = b.Len()
	}
	for band := range NumBands {
		k.writeQueueKey(&b, stream.kind, queue, stream.suffix)
		b.WriteByte(byte('0' + band))
		n.ends[int(numQueueKeys)+band] = b.Len()
	}
	n.all = b.String()
	return n
}

func (k Keys) writeQueueKey(b *strings.Builder, kind, queue, suffix string) {
	b.WriteString(k.prefix)
	b.WriteByte(':')
	b.WriteString(kind)
	b.WriteString(":{")
	b.WriteString(queue)
	b.WriteByte('}')
	b.WriteString(suffix)
}

// q is queue's key of form f.
func (k Keys) q(f queueKey, queue string) string {
	if k.cache != nil {
		if n := k.names(queue); n != nil {
			return n.name(int(f))
		}
	}
	form := queueKeyForms[f]
	return k.prefix + ":" + form.kind + ":{" + queue + "}" + form.suffix
}

// StreamPrefix is the same-slot prefix of queue's band streams; scripts
// append the band (0..9) to it.
func (k Keys) StreamPrefix(queue string) string { return k.q(streamPrefixKey, queue) }

// Stream is the ready stream of one priority band (0..9) of queue.
func (k Keys) Stream(queue string, band int) string {
	if k.cache != nil && band >= 0 && band < NumBands {
		if n := k.names(queue); n != nil {
			return n.name(int(numQueueKeys) + band)
		}
	}
	return k.StreamPrefix(queue) + strconv.Itoa(band)
}

// Streams returns the ten band streams of queue, highest priority (p9) first.
func (k Keys) Streams(queue string) []string {
	out := make([]string, NumBands)
	for i := range out {
		out[i] = k.Stream(queue, NumBands-1-i)
	}
	return out
}

// TaskPrefix is the same-slot prefix of every task hash of queue; scripts
// that learn task ids append the id to it.
func (k Keys) TaskPrefix(queue string) string { return k.q(taskPrefixKey, queue) }

// Task is the hash holding one task.
func (k Keys) Task(queue, id string) string { return k.TaskPrefix(queue) + id }

// TaskEnded is the marker a task deleted as soon as it ended (a retention
// of 0) leaves for a minute after its creation, so that an ingest call sent
// again after its reply was lost finds the task it created (see ingest.lua
// and mark_ended in lua/_retention.lua, which appends the same suffix).
func (k Keys) TaskEnded(queue, id string) string { return k.TaskPrefix(queue) + id + ":ended" }

// TaskLog is the log list of one attempt of a task (see lua/progress.lua):
// the task key with ":log:<attempt>" appended, so it shares the task's
// slot; retain_logs in lua/_retention.lua appends the same suffix.
func (k Keys) TaskLog(queue, id string, attempt int) string {
	return k.Task(queue, id) + ":log:" + strconv.Itoa(attempt)
}

// ResultPrefix is the same-slot prefix of result keys of queue.
func (k Keys) ResultPrefix(queue string) string { return k.q(resultPrefixKey, queue) }

// Result holds a succeeded task's result JSON (TTL DTQ_RESULT_RETENTION_S).
func (k Keys) Result(queue, id string) string { return k.ResultPrefix(queue) + id }

// IdempotencyPrefix is the same-slot prefix of idempotency records of queue.
func (k Keys) IdempotencyPrefix(queue string) string { return k.q(idempotencyPrefixKey, queue) }

// Idempotency is the submission idempotency record for (queue, key).
func (k Keys) Idempotency(queue, key string) string { return k.IdempotencyPrefix(queue) + key }

// Schedule is the ZSET of pending and retrying tasks by due time (epoch ms).
func (k Keys) Schedule(queue string) string { return k.q(scheduleKey, queue) }

// Lease is the ZSET of running tasks by lease deadline (epoch ms).
func (k Keys) Lease(queue string) string { return k.q(leaseKey, queue) }

// Expiry is the ZSET of not-yet-started tasks by expires_at (epoch ms).
func (k Keys) Expiry(queue string) string { return k.q(expiryKey, queue) }

// Depth is the exact counter of non-terminal tasks in queue.
func (k Keys) Depth(queue string) string { return k.q(depthKey, queue) }

// Recent is the capped listing index of queue: a LIST of its task ids
// without their last four digits, newest first.
func (k Keys) Recent(queue string) string { return k.q(recentKey, queue) }

// Retained counts the finished tasks of queue whose retention runs, by
// status and the minute (or hour) their retention ends: field
// <status>:<bucket end, epoch s> -> count.
func (k Keys) Retained(queue string) string { return k.q(retainedKey, queue) }

// Tidy holds where the tidy pass over queue's listing index resumes (a
// position counted from its oldest end).
func (k Keys) Tidy(queue string) string { return k.q(tidyKey, queue) }

// DLQ is the dead-letter index of queue (ZSET task id → failed_at).
func (k Keys) DLQ(queue string) string { return k.q(dlqKey, queue) }

// Events is the capped lifecycle event stream of queue.
func (k Keys) Events(queue string) string { return k.q(eventsKey, queue) }

// Paused exists while queue is paused.
func (k Keys) Paused(queue string) string { return k.q(pausedKey, queue) }

// Limits is queue's flow-control settings hash (rate, concurrency,
// key_concurrency), read by the claim script.
func (k Keys) Limits(queue string) string { return k.q(limitsKey, queue) }

// Rate is the rate limit's state of queue: its theoretical arrival time
// (GCRA), epoch ms.
func (k Keys) Rate(queue string) string { return k.q(rateKey, queue) }

// KeyRunning is the hash concurrency key -> tasks of queue running with it.
func (k Keys) KeyRunning(queue string) string { return k.q(keyRunningKey, queue) }

// KeyFreed is the latest time (ms) a task of queue gave back a
// concurrency-key slot: a claim stamps a task it starts under
// key_concurrency no earlier (see lua/_limits.lua, key_freed).
func (k Keys) KeyFreed(queue string) string { return k.q(keyFreedKey, queue) }

// KeyWaitPrefix is the same-slot prefix of the lists of tasks of queue held
// back by key_concurrency, one list per concurrency key.
func (k Keys) KeyWaitPrefix(queue string) string { return k.q(keyWaitPrefixKey, queue) }

// Held counts the tasks of queue held in those lists (for recount).
func (k Keys) Held(queue string) string { return k.q(heldKey, queue) }

// Limited is set by a claim that a concurrency limit stopped; the next
// release then writes to Wake.
func (k Keys) Limited(queue string) string { return k.q(limitedKey, queue) }

// Wake is the stream a worker blocked by a concurrency limit waits on; a
// releasing finalize adds an entry (capped at one).
func (k Keys) Wake(queue string) string { return k.q(wakeKey, queue) }

// FairState is the hash of queue's key queues (lua/_fair.lua): the key
// sequence counter "seq", and per band the virtual time "vt<b>" and the
// number of tasks in its key queues "n<b>".
func (k Keys) FairState(queue string) string { return k.q(fairStateKey, queue) }

// FairOn exists while queue has key queues (fairness, key_rate or
// key_order set): ingest reads it with the queue's number in one MGET.
func (k Keys) FairOn(queue string) string { return k.q(fairOnKey, queue) }

// FairKeys is the ZSET key -> tasks of queue waiting in that key's queues
// (the top keys by backlog).
func (k Keys) FairKeys(queue string) string { return k.q(fairKeysKey, queue) }

// FairDelay is the ZSET "<band>:<key>" -> when that key's next key_rate
// token is due, for the keys parked until then.
func (k Keys) FairDelay(queue string) string { return k.q(fairDelayKey, queue) }

// KeyRate is the ZSET key -> its key_rate state (GCRA arrival time, epoch
// ms); a time that has passed is dropped.
func (k Keys) KeyRate(queue string) string { return k.q(keyRateKey, queue) }

// FairActivePrefix is the same-slot prefix of the ZSETs, one per band (the
// prefix and the band), of the keys of queue with tasks waiting, scored by
// their pass.
func (k Keys) FairActivePrefix(queue string) string { return k.q(fairActivePrefixKey, queue) }

// FairActive is band's active keys ZSET of queue.
func (k Keys) FairActive(queue string, band int) string {
	return k.FairActivePrefix(queue) + strconv.Itoa(band)
}

// KeyQueuePrefix is the same-slot prefix of the key queues of queue: the
// prefix, the band, ':' and the key name a ZSET of task ids by key
// sequence number.
func (k Keys) KeyQueuePrefix(queue string) string { return k.q(keyQueuePrefixKey, queue) }

// KeyQueue is the key queue of key in band of queue.
func (k Keys) KeyQueue(queue string, band int, key string) string {
	return k.KeyQueuePrefix(queue) + strconv.Itoa(band) + ":" + key
}

// StatsPrefix is the same-slot prefix of the per-minute counters of queue.
func (k Keys) StatsPrefix(queue string) string { return k.q(statsPrefixKey, queue) }

// Stats holds the per-minute counters of queue for minute (epoch minutes).
func (k Keys) Stats(queue string, minute int64) string {
	return k.StatsPrefix(queue) + strconv.FormatInt(minute, 10)
}

// DedupPrefix is the same-slot prefix of queue's deduplication key records
// (lua/_dedup.lua): a key is scoped to its queue.
func (k Keys) DedupPrefix(queue string) string { return k.q(dedupPrefixKey, queue) }

// Dedup is the record of deduplication key key of queue.
func (k Keys) Dedup(queue, key string) string { return k.DedupPrefix(queue) + key }

// DedupCounts counts queue's deduplicated submissions by mode (a collapsed
// submission, or a queued task a replace or keep_last cancelled).
func (k Keys) DedupCounts(queue string) string { return k.q(dedupCountsKey, queue) }

// CancelChannel is the pub/sub channel on which cancel requests for running
// tasks of queue are announced.
func (k Keys) CancelChannel(queue string) string { return k.q(cancelChannelKey, queue) }

// QueueNum is queue's registry number (decimal), written once when the
// queue is first registered, in the queue's slot so that ingest can check
// that the number it stamps into task ids is the queue's: the registry is
// rebuilt from these keys should it be lost, and never renumbers a queue.
func (k Keys) QueueNum(queue string) string { return k.q(queueNumKey, queue) }

// Queues is the global queue registry hash (name → number, #number → name).
func (k Keys) Queues() string { return k.prefix + ":queues" }

// Workers is the global ZSET of worker ids by last heartbeat (epoch ms).
func (k Keys) Workers() string { return k.prefix + ":workers" }

// WorkersOfKey is the ZSET of the ids of HTTP workers that registered
// through the API key named name (id -> last heartbeat ms), which bounds
// them per key. The name is hashed so that any name makes a plain key; the
// tag {<prefix>:workers} puts it in the Cluster slot of Workers, so one
// script updates both.
func (k Keys) WorkersOfKey(name string) string {
	sum := sha256.Sum256([]byte(name))
	return k.prefix + ":workerkey:" + hex.EncodeToString(sum[:12]) + ":{" + k.Workers() + "}"
}

// Worker is the heartbeat record of one worker.
func (k Keys) Worker(id string) string { return k.prefix + ":worker:" + id }

// Audit is the capped audit stream.
func (k Keys) Audit() string { return k.prefix + ":audit" }

// LeaseSecret is the deployment's lease token secret, stored once by the
// first API process when DTQ_LEASE_SECRET is unset.
func (k Keys) LeaseSecret() string { return k.prefix + ":lease_secret" }

// SysEvents is the stream of worker events.
func (k Keys) SysEvents() string { return k.prefix + ":events:_sys" }

// Operation is the key of a handler-level IdempotentOperation.
func (k Keys) Operation(key string) string { return k.prefix + ":op:" + key }

// scheduleTag is the Cluster hash tag every schedule key carries, so that
// one script can change a schedule's hash and both indexes. Queue names
// cannot start with '_', so no queue shares it by name.
const scheduleTag = "{_schedules}"

// ScheduleNames is the global ZSET of every schedule's name (score 0,
// listed in name order).
func (k Keys) ScheduleNames() string { return k.prefix + ":schedules:" + scheduleTag + ":names" }

// ScheduleDue is the global ZSET of running (not paused) schedules by next
// tick (epoch ms).
func (k Keys) ScheduleDue() string { return k.prefix + ":schedules:" + scheduleTag + ":due" }

// ScheduleDefPrefix is the same-slot prefix of the schedule hashes.
func (k Keys) ScheduleDefPrefix() string { return k.prefix + ":schedules:" + scheduleTag + ":def:" }

// ScheduleDef is the hash holding one schedule: its definition and state.
func (k Keys) ScheduleDef(name string) string { return k.ScheduleDefPrefix() + name }

// Waiting is the ZSET of queue's workflow nodes not yet released (status
// waiting), by creation time (epoch ms).
func (k Keys) Waiting(queue string) string { return k.q(waitingKey, queue) }

// WorkflowOutbox is the stream of queue's workflow node ends: the script
// that ends a node appends {w: "<workflow id>:<ref>", s: status, v: result,
// e: error class}; the relay carries each entry to its workflow's slot.
func (k Keys) WorkflowOutbox(queue string) string { return k.q(workflowOutboxKey, queue) }

// WorkflowRelayLock names the process relaying queue's workflow outbox.
func (k Keys) WorkflowRelayLock(queue string) string { return k.q(workflowRelayLockKey, queue) }

// WorkflowTag is the 20 hex digits after the creation time in a workflow
// id: random, or the start of sha256(idempotency key) for a keyed workflow,
// so that every submission with one key lands in one Cluster slot.
func WorkflowTag(id string) string {
	if len(id) < 32 {
		return id
	}
	return id[12:32]
}

// WorkflowKeyTag is the tag of an idempotency key: the first 20 hex
// digits of its SHA-256.
func WorkflowKeyTag(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:10])
}

// WorkflowPrefix is the same-slot prefix of the records of workflows
// whose ids carry tag; a record's key is the prefix and the id.
func (k Keys) WorkflowPrefix(tag string) string { return k.prefix + ":wf:{wf:" + tag + "}:" }

// Workflow is the record hash of workflow id (name, status, counts).
func (k Keys) Workflow(id string) string { return k.WorkflowPrefix(WorkflowTag(id)) + id }

// WorkflowNodes is the hash of workflow id's graph and node states (see
// lua/_workflow.lua).
func (k Keys) WorkflowNodes(id string) string { return k.Workflow(id) + ":n" }

// WorkflowDefs holds the definitions of workflow id's nodes being written
// (a submission's, or a fan-out's): ref -> definition JSON.
func (k Keys) WorkflowDefs(id string) string { return k.Workflow(id) + ":d" }

// WorkflowReleases holds workflow id's releases not yet carried out in the
// nodes' slots: ref -> "kind|task id|queue|detail".
func (k Keys) WorkflowReleases(id string) string { return k.Workflow(id) + ":r" }

// WorkflowParked holds workflow id's node ends the relay could not apply,
// by ref, for the sweep (wf_park.lua).
func (k Keys) WorkflowParked(id string) string { return k.Workflow(id) + ":p" }

// WorkflowIdempotency is the idempotency record of a workflow submission
// with key, in the slot of the workflows that key names.
func (k Keys) WorkflowIdempotency(key string) string {
	return k.prefix + ":wfidem:{wf:" + WorkflowKeyTag(key) + "}:" + key
}

// workflowTag is the Cluster hash tag of the global workflow indexes, so
// that one script writes both.
const workflowTag = "{_wf}"

// WorkflowAttention is the global ZSET of workflows that may need the sweep
// (id -> when they were last marked, epoch ms).
func (k Keys) WorkflowAttention() string { return k.prefix + ":wf:" + workflowTag + ":attention" }

// WorkflowIndex is the global ZSET of workflows by creation time (epoch
// ms), for listings.
func (k Keys) WorkflowIndex() string { return k.prefix + ":wf:" + workflowTag + ":index" }
