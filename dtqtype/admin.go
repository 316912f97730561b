package dtqtype

import (
	"encoding/json"
	"errors"
	"time"
)

// QueueInfo is a queue's state as the admin API shows it.
type QueueInfo struct {
	Name        string           `json:"queue"`
	Depth       int64            `json:"depth"`
	Ready       map[string]int64 `json:"ready"` // per band, "p9" … "p0"
	ReadyTotal  int64            `json:"ready_total"`
	Running     int64            `json:"running"`
	Pending     int64            `json:"pending"` // delivered, unacked
	Scheduled   int64            `json:"scheduled"`
	Waiting     int64            `json:"waiting"` // workflow nodes not yet released
	Paused      bool             `json:"paused"`
	DLQ         int64            `json:"dlq"`
	LiveWorkers int              `json:"live_workers"`
	Unserved    bool             `json:"unserved"` // no live worker serves the queue: its tasks wait
	Throughput  Throughput       `json:"throughput"`
	Limits      *QueueLimits     `json:"limits,omitempty"` // nil when none are set
	// TopKeys are the keys with the most queued tasks (at most 10), for a
	// queue with fairness, key_order or key_rate set.
	TopKeys []KeyBacklog `json:"top_keys,omitempty"`
	// Retained counts the finished tasks kept until their retention ends,
	// by status (succeeded, failed, dead_lettered, cancelled, expired;
	// statuses with none are left out).
	// Dead letters still in the DLQ are counted by DLQ, not here. A task
	// counts until the minute (the hour, for retentions over 6 h) its
	// retention ends in has passed.
	Retained map[string]int64 `json:"retained"`
	// Deduplicated counts the queue's deduplicated submissions by mode
	// (drop, throttle, debounce: submissions collapsed into their key's
	// task; replace, keep_last: queued tasks a newer submission
	// cancelled), since the queue was created; modes with none are left
	// out.
	Deduplicated map[string]int64 `json:"deduplicated,omitempty"`
	// Partitions are the partitions of a partitioned queue (absent for a
	// queue of one), partition 0 first; the fields above are their sums.
	Partitions []PartitionInfo `json:"partitions,omitempty"`
}

// PartitionInfo is one partition of a partitioned queue.
type PartitionInfo struct {
	Partition  int   `json:"partition"`
	Depth      int64 `json:"depth"`
	ReadyTotal int64 `json:"ready_total"`
	Running    int64 `json:"running"`
	Scheduled  int64 `json:"scheduled"`
	DLQ        int64 `json:"dlq"`
}

// Throughput summarizes a queue's last few minutes.
type Throughput struct {
	WindowMinutes int     `json:"window_minutes"`
	Succeeded     int64   `json:"succeeded"`
	Failed        int64   `json:"failed"` // failed + dead_lettered
	Retried       int64   `json:"retried"`
	PerMinute     float64 `json:"per_minute"` // finished tasks per minute
}

// WorkerInfo is a worker's heartbeat record.
type WorkerInfo struct {
	ID                  string   `json:"worker_id"`
	Hostname            string   `json:"hostname"`
	PID                 int      `json:"pid"`
	Version             string   `json:"version"`
	Queues              []string `json:"queues"`
	Concurrency         int      `json:"concurrency"`
	HeartbeatIntervalMS int64    `json:"heartbeat_interval_ms"`
	StartedAt           Time     `json:"started_at"`
	LastHeartbeat       Time     `json:"last_heartbeat"`
	Status              string   `json:"status"`
	Live                bool     `json:"live"`
	InFlight            []string `json:"in_flight"`
	Processed           int64    `json:"processed"`
	Failed              int64    `json:"failed"`
	Retried             int64    `json:"retried"`
	// Kind is "go" for a Worker, "http" for a worker claiming through the
	// HTTP API.
	Kind string `json:"kind"`
	// LastClaim is when an HTTP worker last asked for tasks (nil for Go
	// workers).
	LastClaim *Time `json:"last_claim,omitempty"`
}

// DLQEntry is a dead-lettered task with the time it was dead-lettered.
type DLQEntry struct {
	*TaskInfo
	FailedAt Time `json:"failed_at"`
}

// DLQFilter selects the dead-letter entries of a bulk action
// (Admin.RequeueDLQMatching, Admin.PurgeDLQMatching); in JSON it is the
// body of the API's bulk routes.
type DLQFilter struct {
	Queue      string `json:"queue"`       // "" = every queue
	Type       string `json:"type"`        // "" = any
	ErrorClass string `json:"error_class"` // "" = any
	// Cursor is the NextCursor of the call before, to continue the action
	// ("" = from the start).
	Cursor string `json:"cursor"`
}

// AuditEntry is one destructive admin action.
type AuditEntry struct {
	ID        string `json:"id"`
	TS        Time   `json:"ts"`
	Actor     string `json:"actor"`
	Role      string `json:"role"`
	Action    string `json:"action"`
	Target    string `json:"target"`
	RequestID string `json:"request_id"`
	Detail    string `json:"detail,omitempty"`
}

// MinuteStats are one queue-minute's counters, written by the scripts.
type MinuteStats struct {
	Minute       Time             `json:"minute"`
	Succeeded    int64            `json:"succeeded"`
	Failed       int64            `json:"failed"`
	DeadLettered int64            `json:"dead_lettered"`
	Retried      int64            `json:"retried"`
	Cancelled    int64            `json:"cancelled"`
	Started      int64            `json:"started"`
	WaitMSSum    int64            `json:"wait_ms_sum"`
	RunMSSum     int64            `json:"run_ms_sum"`
	WaitBuckets  map[string]int64 `json:"wait_buckets"` // "lt_<ms>" -> count: below that power of two ("lt_1ms" = 0 ms)
	RunBuckets   map[string]int64 `json:"run_buckets"`
}

// Add adds o's counters and buckets to m (summing one minute over queues).
func (m *MinuteStats) Add(o *MinuteStats) {
	m.Succeeded += o.Succeeded
	m.Failed += o.Failed
	m.DeadLettered += o.DeadLettered
	m.Retried += o.Retried
	m.Cancelled += o.Cancelled
	m.Started += o.Started
	m.WaitMSSum += o.WaitMSSum
	m.RunMSSum += o.RunMSSum
	for k, v := range o.WaitBuckets {
		m.WaitBuckets[k] += v
	}
	for k, v := range o.RunBuckets {
		m.RunBuckets[k] += v
	}
}

// BulkResult answers a bulk DLQ action.
type BulkResult struct {
	Matched    int64   `json:"matched"`
	Processed  int64   `json:"processed"`
	NextCursor *string `json:"next_cursor"`
}

// QueueLimits are a queue's flow-control limits, enforced by the claim
// script across every worker. Unset fields (nil, 0) do not limit.
type QueueLimits struct {
	// Rate bounds task starts per period (a token bucket).
	Rate *RateLimit `json:"rate,omitempty"`
	// Concurrency bounds the queue's running tasks at once.
	Concurrency int `json:"concurrency,omitempty"`
	// KeyConcurrency bounds running tasks at once per concurrency key.
	KeyConcurrency int `json:"key_concurrency,omitempty"`
	// Fairness shares the starts of each priority band between the keys
	// with ready tasks by weight (keyless tasks form one key).
	Fairness *Fairness `json:"fairness,omitempty"`
	// KeyRate bounds task starts per period per concurrency key.
	KeyRate *RateLimit `json:"key_rate,omitempty"`
	// KeyOrder "fifo" starts each key's tasks in submission order, a
	// re-entering task (hand-back, reclaim, retry, DLQ requeue) at its
	// first place; "" keeps no such promise.
	KeyOrder string `json:"key_order,omitempty"`
	// Events is how much of the task lifecycle the queue's event stream
	// records: EventsFull ("" reads the same) or EventsOutcomes. It is a
	// setting, not a limit, kept with the limits (DELETE resets it).
	Events string `json:"events,omitempty"`
}

// The event detail settings of a queue (QueueLimits.Events).
const (
	// EventsFull records every transition's event (the default).
	EventsFull = "full"
	// EventsOutcomes records only the events a user acts on: successes,
	// retries scheduled, failures and dead letters, cancels, expiries,
	// lease losses, hand-backs, requeues, deduplications and progress; it
	// leaves out TASK_PENDING, TASK_QUEUED at submission, promotion and a
	// workflow node's release, TASK_RETRIED and TASK_STARTED.
	EventsOutcomes = "outcomes"
)

// Fairness gives each key a weight: keys with ready tasks get starts in
// proportion to their weights.
type Fairness struct {
	// DefaultWeight is the weight of keys not in Weights and of keyless
	// tasks (default 1).
	DefaultWeight int `json:"default_weight,omitempty"`
	// Weights are per key weights.
	Weights map[string]int `json:"weights,omitempty"`
}

// KeyBacklog is one key's queued tasks in a queue with key queues.
type KeyBacklog struct {
	Key    string `json:"key"` // "" for the keyless tasks
	Queued int64  `json:"queued"`
}

// RateLimit allows Limit task starts per Period, spaced Period/Limit apart;
// Burst (default 1) lets an idle queue start up to that many at once.
type RateLimit struct {
	Limit  int      `json:"limit"`
	Period Duration `json:"period"`
	Burst  int      `json:"burst,omitempty"`
}

// Duration is a time.Duration written in JSON as Go syntax ("1s", "250ms").
type Duration time.Duration

// MarshalJSON writes d as a string like "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`must be a duration string like "1s" or "500ms"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(`must be a duration string like "1s" or "500ms"`)
	}
	*d = Duration(v)
	return nil
}

// QueueSize is the part of a queue's state that is cheap to read for every
// queue at once: counters and set sizes, no per-band stream reads.
type QueueSize struct {
	Name      string `json:"queue"`
	Depth     int64  `json:"depth"`
	Running   int64  `json:"running"`
	Scheduled int64  `json:"scheduled"`
	Waiting   int64  `json:"waiting"` // workflow nodes not yet released
	DLQ       int64  `json:"dlq"`
	Paused    bool   `json:"paused"`
	Retained  int64  `json:"retained"` // finished tasks kept (see QueueInfo.Retained)
}

// RedisMemory is Redis's memory use (on Redis Cluster, summed over the
// masters).
type RedisMemory struct {
	UsedBytes int64 `json:"used_bytes"`
	// MaxBytes is maxmemory; 0 means none is set.
	MaxBytes int64 `json:"max_bytes"`
}

// QueueTotals sums QueueSize over many queues.
type QueueTotals struct {
	Queues    int   `json:"queues"`
	Depth     int64 `json:"depth"`
	Running   int64 `json:"running"`
	Scheduled int64 `json:"scheduled"`
	Waiting   int64 `json:"waiting"`
	DLQ       int64 `json:"dlq"`
	Paused    int   `json:"paused"`   // queues paused
	Retained  int64 `json:"retained"` // finished tasks kept
}

// Add counts one queue into t.
func (t *QueueTotals) Add(s QueueSize) {
	t.Queues++
	t.Depth += s.Depth
	t.Running += s.Running
	t.Scheduled += s.Scheduled
	t.Waiting += s.Waiting
	t.DLQ += s.DLQ
	t.Retained += s.Retained
	if s.Paused {
		t.Paused++
	}
}

// QueueScaling is a queue's autoscaling signal (docs/autoscaling.md): the
// workers it wants and what that was computed from.
type QueueScaling struct {
	Queue string `json:"queue"`
	// DesiredWorkers is ⌈(ArrivalRate × service time + Ready × service
	// time / drain) / PerWorkerConcurrency⌉, at least 1 while a task is
	// ready, held, running or due within a minute, or the queue did
	// anything within the idle time.
	DesiredWorkers int64 `json:"desired_workers"`
	Ready          int64 `json:"ready"`
	// Held counts the tasks a concurrency key holds back, and on a paused
	// queue its ready tasks too.
	Held    int64 `json:"held"`
	Running int64 `json:"running"`
	// DueSoon counts the delayed and retrying tasks due within a minute.
	DueSoon int64 `json:"due_soon"`
	// ArrivalRate is the tasks created due now per second over the last
	// half minute.
	ArrivalRate float64 `json:"arrival_rate"`
	// ServiceTimeMeanMS is the mean run time of the attempts that ended in
	// the last five minutes (0 when none did).
	ServiceTimeMeanMS float64 `json:"service_time_mean_ms"`
	// OldestReadyAgeMS is how long the oldest ready task has waited (0 when
	// none waits).
	OldestReadyAgeMS     int64 `json:"oldest_ready_age_ms"`
	PerWorkerConcurrency int   `json:"per_worker_concurrency"`
}
