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

// unreachable is a Redis client that nothing connects through: Open and
// the constructors do not contact Redis.
func unreachable(t *testing.T) redis.UniversalClient {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

// TestEveryRoleHasTheDeploymentsSettings: Open takes every setting of a
// DeploymentConfig, and every role made from the Deployment has them all,
// whatever its own config says.
func TestEveryRoleHasTheDeploymentsSettings(t *testing.T) {
	t.Parallel()
	clock := func() time.Time { return time.UnixMilli(1764000000000) }
	full := deployment{keyPrefix: "acme", eventsMaxLen: 500, auditMaxLen: 600, dlqMaxLen: 700, disableDLQ: true,
		succeededRetention: 2 * time.Hour, failedRetention: NoRetention, resultRetention: 3 * time.Hour,
		idempotencyTTL: 48 * time.Hour, maxWorkers: 9, replicaAcks: 2, replicaAckTimeout: 3 * time.Second, clock: clock}
	require.Equal(t, reflect.TypeFor[deployment]().NumField(), reflect.TypeFor[DeploymentConfig]().NumField(),
		"a DeploymentConfig field per setting")
	d, err := Open(unreachable(t), &DeploymentConfig{KeyPrefix: "acme", EventsMaxLen: 500, AuditMaxLen: 600, DLQMaxLen: 700,
		DisableDLQ: true, SucceededRetention: 2 * time.Hour, FailedRetention: NoRetention, ResultRetention: 3 * time.Hour,
		IdempotencyTTL: 48 * time.Hour, MaxWorkers: 9, ReplicaAcks: 2, ReplicaAckTimeout: 3 * time.Second, Clock: clock})
	require.NoError(t, err)
	want := settingsOf(full)
	require.Equal(t, want, settingsOf(d.dep))

	c, err := d.NewClient(&ClientConfig{MaxQueueDepth: 5, TaskTypes: []string{"t"}})
	require.NoError(t, err)
	w, err := d.NewWorker(&WorkerConfig{Concurrency: 3, Queues: map[string]int{"q": 1}})
	require.NoError(t, err)
	g, err := d.NewWorkerGateway(&WorkerGatewayConfig{RetryBaseDelay: time.Minute, VisibilityTimeout: time.Hour, LeaseSecret: "s"})
	require.Error(t, err, "a LeaseSecret under MinLeaseSecretLen")
	require.Nil(t, g)
	g, err = d.NewWorkerGateway(&WorkerGatewayConfig{RetryBaseDelay: time.Minute, VisibilityTimeout: time.Hour})
	require.NoError(t, err)
	a, err := d.NewAdmin(nil)
	require.NoError(t, err)
	s, err := d.NewScheduler(nil)
	require.NoError(t, err)
	for name, got := range map[string]deployment{"Client": c.dep, "Worker": w.dep, "Worker's scheduler": w.sched.client.dep,
		"WorkerGateway": g.dep, "Admin's Client": a.client.dep, "Scheduler's Client": s.client.dep} {
		require.Equal(t, want, settingsOf(got), name)
	}
	require.Equal(t, full.adminSettings(), a.settings)
	require.Equal(t, full.workerSettings(w.cfg.WorkerID, w.cfg.VisibilityTimeout), w.settings)
}

// TestOpenNilIsTheDefaults: a nil DeploymentConfig is the default
// deployment.
func TestOpenNilIsTheDefaults(t *testing.T) {
	t.Parallel()
	defaults, err := deployment{}.resolve()
	require.NoError(t, err)
	require.Equal(t, "dtq", defaults.keyPrefix)
	require.Equal(t, fmt.Sprint(reflect.ValueOf(time.Now).Pointer()), settingsOf(defaults)["clock"])
	d, err := Open(unreachable(t), nil)
	require.NoError(t, err)
	require.Equal(t, settingsOf(defaults), settingsOf(d.dep))
	_, err = Open(nil, nil)
	require.EqualError(t, err, "dtq: Open needs a Redis client")
}

// TestDeploymentRefusals: a setting out of range is refused by name, once,
// by Open.
func TestDeploymentRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  DeploymentConfig
		want string
	}{
		{"prefix with a brace", DeploymentConfig{KeyPrefix: "a{b}"}, "KeyPrefix"},
		{"succeeded retention past 366 days", DeploymentConfig{SucceededRetention: MaxRetention + time.Second},
			"dtq: SucceededRetention must be NoRetention or up to 366 days"},
		{"negative failed retention", DeploymentConfig{FailedRetention: -2}, "dtq: FailedRetention must be NoRetention or up to 366 days"},
		{"idempotency TTL under 1s", DeploymentConfig{IdempotencyTTL: time.Millisecond}, "IdempotencyTTL"},
		{"negative worker bound", DeploymentConfig{MaxWorkers: -1}, "MaxWorkers"},
	}
	rc := unreachable(t)
	for _, tt := range tests {
		d, err := Open(rc, &tt.cfg)
		require.ErrorContains(t, err, tt.want, tt.name)
		require.Nil(t, d, tt.name)
	}
}

// TestWorkerServesOneClient: a worker's scheduler and its workflow nodes
// submit through one Client with the SchedulerClient's limits; a Client of
// another key prefix is refused where a config takes one.
func TestWorkerServesOneClient(t *testing.T) {
	t.Parallel()
	rc := unreachable(t)
	d, err := Open(rc, &DeploymentConfig{KeyPrefix: "acme"})
	require.NoError(t, err)
	w, err := d.NewWorker(&WorkerConfig{SchedulerClient: &ClientConfig{MaxAttempts: 3}})
	require.NoError(t, err)
	require.Same(t, w.sched.client, w.nodes)
	require.Same(t, w.nodes.wf, w.wf)
	require.Equal(t, 3, w.sched.client.lim.maxAttempts, "the SchedulerClient's own limits")
	_, err = d.NewWorker(&WorkerConfig{SchedulerClient: &ClientConfig{MaxAttempts: -1}})
	require.ErrorContains(t, err, "dtq: WorkerConfig.SchedulerClient: ")

	other, err := Open(rc, &DeploymentConfig{KeyPrefix: "other"})
	require.NoError(t, err)
	oc, err := other.NewClient(nil)
	require.NoError(t, err)
	_, err = d.NewAdmin(&AdminConfig{Client: oc})
	require.EqualError(t, err, `dtq: AdminConfig.Client uses key prefix "other", the Deployment "acme"`)
	_, err = d.NewScheduler(&SchedulerConfig{Client: oc})
	require.EqualError(t, err, `dtq: SchedulerConfig.Client uses key prefix "other", the Deployment "acme"`)
	require.EqualError(t, RunWorkflowMaintenance(t.Context(), d, &WorkflowMaintenanceConfig{Client: oc}),
		`dtq: WorkflowMaintenanceConfig.Client uses key prefix "other", the Deployment "acme"`)
}
