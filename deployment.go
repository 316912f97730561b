package dtq

import (
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/rdb"
)

// DeploymentConfig holds the settings every process of a deployment must
// agree on, Go or dtq api, producer, worker or operator. A zero value
// selects the default given in the field's comment.
type DeploymentConfig struct {
	// KeyPrefix starts every Redis key: 1..64 letters, digits and the
	// characters "_.:-" (no braces: they would break the {queue} hash tag).
	// Default "dtq".
	KeyPrefix string
	// EventsMaxLen caps each queue's event stream (approximately). Default
	// DefaultStreamMaxLen.
	EventsMaxLen int64
	// AuditMaxLen caps the audit stream. Default DefaultStreamMaxLen.
	AuditMaxLen int64
	// DLQMaxLen caps each queue's dead-letter index; the oldest entries
	// leave it past the cap. Default 10000.
	DLQMaxLen int64
	// DisableDLQ makes exhausted and permanent failures end as failed
	// instead of dead_lettered, and lets an Admin requeue failed tasks by
	// id. Default false (DLQ on).
	DisableDLQ bool
	// SucceededRetention is how long a succeeded task is kept, as a compact
	// record (see docs/operations.md, "Sizing Redis"). Default
	// DefaultSucceededRetention.
	SucceededRetention time.Duration
	// FailedRetention is how long a failed, cancelled or expired task is
	// kept, and a dead-lettered one once it leaves the DLQ index; also a
	// queued task that a replace or keep_last submission cancels
	// (docs/deduplication.md) and a task an Admin ends. Default
	// DefaultFailedRetention. For both retentions, NoRetention deletes the
	// task as it finishes, a task with an idempotency key is kept at least
	// as long as its record, and a task's own Submission.Retention wins; at
	// most MaxRetention.
	FailedRetention time.Duration
	// ResultRetention is how long a result is kept. Default 1h.
	ResultRetention time.Duration
	// IdempotencyTTL is how long an idempotency record lives (plus a
	// delayed task's delay); a DLQ requeue gives the record a fresh one. At
	// least 1s. Default 24h.
	IdempotencyTTL time.Duration
	// MaxWorkers bounds the worker records of the deployment
	// (DTQ_MAX_WORKERS): past it a new worker id is refused a record
	// (TooManyWorkersError; a Go worker then runs unrecorded and retries at
	// each heartbeat, an HTTP worker's claim fails), after records silent
	// for an hour were evicted to make room. Default DefaultMaxWorkers.
	MaxWorkers int64
	// ReplicaAcks makes every acknowledged write wait until this many
	// replicas have it (Redis WAIT) before it is answered; a write they did
	// not all acknowledge within ReplicaAckTimeout (default 1s) fails with
	// ErrNotReplicated (sending it again is safe). Default 0: no waiting.
	ReplicaAcks       int
	ReplicaAckTimeout time.Duration
	// Clock returns the current time for creation and due times, leases and
	// expiry (tests move it). Default time.Now.
	Clock func() time.Time
}

// Deployment is one dtq deployment as a process sees it: the Redis that
// holds it and the settings of its DeploymentConfig, checked once. Every
// role is made from it (NewClient, NewWorker, Inspector, NewAdmin,
// NewWorkerGateway, NewScheduler), so they all agree on the settings. It
// is safe for concurrent use.
type Deployment struct {
	redis redis.UniversalClient
	dep   deployment
}

// Open returns the Deployment stored in c with the settings of cfg (nil
// selects every default). It fails when a setting is out of range; it does
// not contact Redis.
//
// c may be any redis.UniversalClient: a plain client, a Sentinel failover
// client or a Cluster client. Every role made from the Deployment uses c's
// connection pool (see NewWorker for what a Worker holds).
func Open(c redis.UniversalClient, cfg *DeploymentConfig) (*Deployment, error) {
	if c == nil {
		return nil, errors.New("dtq: Open needs a Redis client")
	}
	var o DeploymentConfig
	if cfg != nil {
		o = *cfg
	}
	dep, err := deployment{keyPrefix: o.KeyPrefix, eventsMaxLen: o.EventsMaxLen, auditMaxLen: o.AuditMaxLen,
		dlqMaxLen: o.DLQMaxLen, disableDLQ: o.DisableDLQ, succeededRetention: o.SucceededRetention,
		failedRetention: o.FailedRetention, resultRetention: o.ResultRetention, idempotencyTTL: o.IdempotencyTTL,
		maxWorkers: o.MaxWorkers, replicaAcks: o.ReplicaAcks, replicaAckTimeout: o.ReplicaAckTimeout, clock: o.Clock,
	}.resolve()
	if err != nil {
		return nil, err
	}
	return &Deployment{redis: c, dep: dep}, nil
}

// deployment holds a Deployment's settings with the defaults applied:
// resolve applies them and checks the ranges, and every role builds its
// Redis handle and its scripts' settings from the result, so no role
// defaults or checks one of them on its own.
type deployment struct {
	keyPrefix    string
	eventsMaxLen int64
	auditMaxLen  int64
	dlqMaxLen    int64
	disableDLQ   bool
	// Retentions as configured: NoRetention keeps nothing (see
	// scriptRetention).
	succeededRetention time.Duration
	failedRetention    time.Duration
	resultRetention    time.Duration
	idempotencyTTL     time.Duration
	maxWorkers         int64
	replicaAcks        int
	replicaAckTimeout  time.Duration
	clock              func() time.Time
}

// Defaults of the deployment settings that no exported constant names.
const (
	defaultKeyPrefix         = "dtq"
	defaultDLQMaxLen         = 10000
	defaultResultRetention   = time.Hour
	defaultIdempotencyTTL    = 24 * time.Hour
	defaultReplicaAckTimeout = time.Second
)

// resolve returns d with every zero setting at its default, or an error
// naming the setting that is out of range.
func (d deployment) resolve() (deployment, error) {
	orDefault(&d.keyPrefix, defaultKeyPrefix)
	orDefault(&d.eventsMaxLen, DefaultStreamMaxLen)
	orDefault(&d.auditMaxLen, DefaultStreamMaxLen)
	orDefault(&d.dlqMaxLen, defaultDLQMaxLen)
	orDefault(&d.succeededRetention, DefaultSucceededRetention)
	orDefault(&d.failedRetention, DefaultFailedRetention)
	orDefault(&d.resultRetention, defaultResultRetention)
	orDefault(&d.idempotencyTTL, defaultIdempotencyTTL)
	orDefault(&d.maxWorkers, DefaultMaxWorkers)
	if d.replicaAckTimeout <= 0 {
		d.replicaAckTimeout = defaultReplicaAckTimeout
	}
	if d.clock == nil {
		d.clock = time.Now
	}
	if err := checkPrefix(d.keyPrefix); err != nil {
		return d, err
	}
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"SucceededRetention", d.succeededRetention}, {"FailedRetention", d.failedRetention}} {
		if r.d != NoRetention && (r.d < 0 || r.d > MaxRetention) {
			return d, fmt.Errorf("dtq: %s must be NoRetention or up to 366 days", r.name)
		}
	}
	if d.idempotencyTTL < time.Second {
		return d, errors.New("dtq: IdempotencyTTL must be at least 1s")
	}
	if d.maxWorkers < 0 {
		return d, errors.New("dtq: MaxWorkers must not be negative")
	}
	return d, nil
}

// orDefault sets *v to def when it is zero.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// storage returns a role's Redis handle on c: keys under the prefix,
// acknowledged writes waiting for the replicas.
func (d *deployment) storage(c redis.UniversalClient) *rdb.RDB {
	r := rdb.New(c, d.keyPrefix)
	r.SetReplicaAcks(d.replicaAcks, d.replicaAckTimeout)
	return r
}

// workerSettings are the scripts' settings of a worker named workerID
// whose leases last lease: a Go worker's, or a WorkerGateway's.
func (d *deployment) workerSettings(workerID string, lease time.Duration) rdb.WorkerSettings {
	return rdb.WorkerSettings{
		WorkerID: workerID, Lease: lease, EventsMaxLen: d.eventsMaxLen,
		SucceededRetention: scriptRetention(d.succeededRetention), FailedRetention: scriptRetention(d.failedRetention),
		ResultRetention: d.resultRetention, DLQEnabled: !d.disableDLQ, DLQMaxLen: d.dlqMaxLen,
	}
}

// adminSettings are the scripts' settings of an Admin.
func (d *deployment) adminSettings() rdb.AdminSettings {
	return rdb.AdminSettings{
		EventsMaxLen: d.eventsMaxLen, FailedRetention: scriptRetention(d.failedRetention),
		IdempotencyTTL: d.idempotencyTTL, DLQEnabled: !d.disableDLQ, AuditMaxLen: d.auditMaxLen,
	}
}

// scriptRetention is a configured retention as the scripts take it:
// NoRetention becomes 0, "delete as it finishes".
func scriptRetention(d time.Duration) time.Duration {
	if d == NoRetention {
		return 0
	}
	return d
}

// storage returns a new Redis handle of d's (see deployment.storage): each
// role has its own, for the bounds it sets on it.
func (d *Deployment) storage() *rdb.RDB { return d.dep.storage(d.redis) }

// clientOr returns c, checked to use d's key prefix, or when c is nil a new
// Client of d with default limits; config names the config type that gave
// c, for the error.
func (d *Deployment) clientOr(c *Client, config string) (*Client, error) {
	if c == nil {
		return d.NewClient(nil)
	}
	if c.dep.keyPrefix != d.dep.keyPrefix {
		return nil, fmt.Errorf("dtq: %s.Client uses key prefix %q, the Deployment %q", config, c.dep.keyPrefix, d.dep.keyPrefix)
	}
	return c, nil
}

// KeyPrefix is the prefix of d's Redis keys, for a program that keeps keys
// of its own beside them.
func (d *Deployment) KeyPrefix() string { return d.dep.keyPrefix }
