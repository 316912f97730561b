package dtq

import (
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/rdb"
)

// deployment holds the settings every process of a deployment must agree
// on (see "Deployment settings" in the package documentation). Each config
// type gives the ones it has (its deployment method; the others stay zero),
// resolve applies the defaults and checks the ranges, and every role builds
// its Redis handle and its scripts' settings from the result: no role
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

// The deployment settings each config type has.

func (c *ClientConfig) deployment() deployment {
	if c == nil {
		return deployment{}
	}
	return deployment{keyPrefix: c.KeyPrefix, eventsMaxLen: c.EventsMaxLen, idempotencyTTL: c.IdempotencyTTL,
		failedRetention: c.FailedRetention,
		replicaAcks:     c.ReplicaAcks, replicaAckTimeout: c.ReplicaAckTimeout, clock: c.Clock}
}

func (c *WorkerConfig) deployment() deployment {
	if c == nil {
		return deployment{}
	}
	return deployment{keyPrefix: c.KeyPrefix, eventsMaxLen: c.EventsMaxLen, dlqMaxLen: c.DLQMaxLen, disableDLQ: c.DisableDLQ,
		succeededRetention: c.SucceededRetention, failedRetention: c.FailedRetention, resultRetention: c.ResultRetention,
		maxWorkers: c.MaxWorkers, replicaAcks: c.ReplicaAcks, replicaAckTimeout: c.ReplicaAckTimeout, clock: c.Clock}
}

// deployment: a WorkerGateway's settings are a worker's.
func (c *WorkerGatewayConfig) deployment() deployment {
	if c == nil {
		return deployment{}
	}
	return c.workerConfig().deployment()
}

func (c *AdminConfig) deployment() deployment {
	if c == nil {
		return deployment{}
	}
	return deployment{keyPrefix: c.KeyPrefix, eventsMaxLen: c.EventsMaxLen, auditMaxLen: c.AuditMaxLen, disableDLQ: c.DisableDLQ,
		failedRetention: c.FailedRetention, idempotencyTTL: c.IdempotencyTTL,
		replicaAcks: c.ReplicaAcks, replicaAckTimeout: c.ReplicaAckTimeout, clock: c.Clock}
}

func (c *InspectorConfig) deployment() deployment {
	if c == nil {
		return deployment{}
	}
	return deployment{keyPrefix: c.KeyPrefix}
}
