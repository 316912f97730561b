package dtq

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// settingsOf is d field by field, the clock by identity, for comparing
// deployments that were given different fields.
func settingsOf(d deployment) map[string]string {
	v := reflect.ValueOf(d)
	out := make(map[string]string, v.NumField())
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Func {
			out[v.Type().Field(i).Name] = fmt.Sprint(f.Pointer())
			continue
		}
		out[v.Type().Field(i).Name] = fmt.Sprint(f)
	}
	return out
}

// TestEveryConfigResolvesTheSameDeployment: each config type given the same
// deployment settings resolves the same value, field by field; a setting a
// config type does not have is the default.
func TestEveryConfigResolvesTheSameDeployment(t *testing.T) {
	t.Parallel()
	clock := func() time.Time { return time.UnixMilli(1764000000000) }
	full := deployment{keyPrefix: "acme", eventsMaxLen: 500, auditMaxLen: 600, dlqMaxLen: 700, disableDLQ: true,
		succeededRetention: 2 * time.Hour, failedRetention: NoRetention, resultRetention: 3 * time.Hour,
		idempotencyTTL: 48 * time.Hour, maxWorkers: 9, replicaAcks: 2, replicaAckTimeout: 3 * time.Second, clock: clock}
	defaults, err := deployment{}.resolve()
	require.NoError(t, err)

	worker := func() *WorkerConfig {
		return &WorkerConfig{KeyPrefix: "acme", EventsMaxLen: 500, DLQMaxLen: 700, MaxWorkers: 9, DisableDLQ: true,
			SucceededRetention: 2 * time.Hour, FailedRetention: NoRetention, ResultRetention: 3 * time.Hour,
			ReplicaAcks: 2, ReplicaAckTimeout: 3 * time.Second, Clock: clock}
	}
	gateway := &WorkerGatewayConfig{KeyPrefix: "acme", EventsMaxLen: 500, DLQMaxLen: 700, MaxWorkers: 9, DisableDLQ: true,
		SucceededRetention: 2 * time.Hour, FailedRetention: NoRetention, ResultRetention: 3 * time.Hour,
		ReplicaAcks: 2, ReplicaAckTimeout: 3 * time.Second, Clock: clock,
		// Settings that are not the deployment's change nothing in it.
		RetryBaseDelay: time.Minute, VisibilityTimeout: time.Hour, LeaseSecret: "s"}
	withOwn := worker()
	withOwn.Concurrency, withOwn.Queues = 3, map[string]int{"q": 1}

	workerFields := []string{"keyPrefix", "eventsMaxLen", "dlqMaxLen", "disableDLQ", "succeededRetention",
		"failedRetention", "resultRetention", "maxWorkers", "replicaAcks", "replicaAckTimeout", "clock"}
	tests := []struct {
		name string
		has  []string // the deployment settings the config type has
		got  deployment
	}{
		{"ClientConfig", []string{"keyPrefix", "eventsMaxLen", "idempotencyTTL", "replicaAcks", "replicaAckTimeout", "clock"},
			(&ClientConfig{KeyPrefix: "acme", EventsMaxLen: 500, IdempotencyTTL: 48 * time.Hour, ReplicaAcks: 2,
				ReplicaAckTimeout: 3 * time.Second, Clock: clock, MaxQueueDepth: 5, TaskTypes: []string{"t"}}).deployment()},
		{"WorkerConfig", workerFields, worker().deployment()},
		{"WorkerConfig with its own settings", workerFields, withOwn.deployment()},
		{"WorkerGatewayConfig", workerFields, gateway.deployment()},
		{"AdminConfig", []string{"keyPrefix", "eventsMaxLen", "auditMaxLen", "disableDLQ", "failedRetention",
			"idempotencyTTL", "replicaAcks", "replicaAckTimeout", "clock"},
			(&AdminConfig{KeyPrefix: "acme", EventsMaxLen: 500, AuditMaxLen: 600, DisableDLQ: true, FailedRetention: NoRetention,
				IdempotencyTTL: 48 * time.Hour, ReplicaAcks: 2, ReplicaAckTimeout: 3 * time.Second, Clock: clock}).deployment()},
		{"InspectorConfig", []string{"keyPrefix"}, (&InspectorConfig{KeyPrefix: "acme"}).deployment()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.got.resolve()
			require.NoError(t, err)
			want := settingsOf(defaults)
			for _, f := range tt.has {
				require.Contains(t, want, f)
				want[f] = settingsOf(full)[f]
			}
			require.Equal(t, want, settingsOf(got))
		})
	}
}

// TestNilConfigsResolveTheDefaults: a nil config of every type is the
// default deployment.
func TestNilConfigsResolveTheDefaults(t *testing.T) {
	t.Parallel()
	defaults, err := deployment{}.resolve()
	require.NoError(t, err)
	require.Equal(t, "dtq", defaults.keyPrefix)
	require.Equal(t, fmt.Sprint(reflect.ValueOf(time.Now).Pointer()), settingsOf(defaults)["clock"])
	for _, d := range []deployment{(*ClientConfig)(nil).deployment(), (*WorkerConfig)(nil).deployment(),
		(*WorkerGatewayConfig)(nil).deployment(), (*AdminConfig)(nil).deployment(), (*InspectorConfig)(nil).deployment()} {
		got, err := d.resolve()
		require.NoError(t, err)
		require.Equal(t, settingsOf(defaults), settingsOf(got))
	}
}

// TestDeploymentRefusals: a setting out of range is refused by name, the
// same for every config type that has it.
func TestDeploymentRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    deployment
		want string
	}{
		{"prefix with a brace", deployment{keyPrefix: "a{b}"}, "KeyPrefix"},
		{"succeeded retention past 366 days", deployment{succeededRetention: MaxRetention + time.Second}, "SucceededRetention"},
		{"negative failed retention", deployment{failedRetention: -2}, "FailedRetention"},
		{"idempotency TTL under 1s", deployment{idempotencyTTL: time.Millisecond}, "IdempotencyTTL"},
		{"negative worker bound", deployment{maxWorkers: -1}, "MaxWorkers"},
	}
	for _, tt := range tests {
		_, err := tt.d.resolve()
		require.ErrorContains(t, err, tt.want, tt.name)
	}
	// The constructors refuse it the same way (nothing connects to Redis).
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rc.Close()
	tooLong := MaxRetention + time.Second
	_, werr := NewWorker(rc, &WorkerConfig{FailedRetention: tooLong})
	_, gerr := NewWorkerGateway(rc, &WorkerGatewayConfig{FailedRetention: tooLong})
	_, aerr := NewAdmin(rc, &AdminConfig{FailedRetention: tooLong})
	for _, err := range []error{werr, gerr, aerr} {
		require.EqualError(t, err, "dtq: FailedRetention must be NoRetention or up to 366 days")
	}
}

// TestServedClientsShareTheDeployment: the Client of a worker's Scheduler
// and an Admin's default Client take their role's deployment settings (the
// scheduler's Client keeps its own IdempotencyTTL, which a WorkerConfig
// does not have).
func TestServedClientsShareTheDeployment(t *testing.T) {
	t.Parallel()
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // nothing connects
	defer rc.Close()
	clock := func() time.Time { return time.UnixMilli(1764000000000) }
	w, err := NewWorker(rc, &WorkerConfig{KeyPrefix: "acme", EventsMaxLen: 500, ReplicaAcks: 1, Clock: clock,
		SchedulerClient: &ClientConfig{KeyPrefix: "other", IdempotencyTTL: time.Hour, MaxAttempts: 3}})
	require.NoError(t, err)
	want := w.dep
	want.idempotencyTTL = time.Hour
	require.Equal(t, settingsOf(want), settingsOf(w.sched.client.dep))
	require.Equal(t, 3, w.sched.client.lim.maxAttempts, "the SchedulerClient's own limits")

	a, err := NewAdmin(rc, &AdminConfig{KeyPrefix: "acme", IdempotencyTTL: time.Hour, Clock: clock})
	require.NoError(t, err)
	dep, err := (&AdminConfig{KeyPrefix: "acme", IdempotencyTTL: time.Hour, Clock: clock}).deployment().resolve()
	require.NoError(t, err)
	require.Equal(t, settingsOf(dep), settingsOf(a.client.dep))
}
