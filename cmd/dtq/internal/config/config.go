// Package config reads dtq's server configuration (docs/configuration.md): every DTQ_*
// environment variable, each with a --lower-case-with-dashes flag. A flag
// overrides the environment, which overrides the default. Every value is
// validated at start, and a bad one is reported with the variable's name,
// its flag and the accepted range.
package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/dtq-io/dtq/cmd/dtq/internal/access"
	"github.com/spf13/pflag"
)

// EnvPrefix starts every configuration variable's name.
const EnvPrefix = "DTQ_"

// Config is the validated configuration of a dtq server process. Obtain it
// from Load or Default; every field holds a usable value.
type Config struct {
	// RedisURL is DTQ_REDIS_URL: redis://, rediss://, redis+sentinel:// or
	// redis+cluster:// (see ParseRedisURL). Default redis://127.0.0.1:6379/0.
	RedisURL string
	// KeyPrefix is DTQ_KEY_PREFIX; every Redis key starts with it. Default "dtq".
	KeyPrefix string
	// APIAddr is DTQ_API_ADDR, the API's listen address. Default 127.0.0.1:8080.
	APIAddr string
	// Queues is DTQ_QUEUES, the queues a worker serves with their weights, in
	// the order given. Default "default" (weight 1).
	Queues []QueueWeight
	// QueuePolicy is DTQ_QUEUE_POLICY, QueuePolicyOpen or
	// QueuePolicyDeclared. Default open.
	QueuePolicy string
	// QueuesDeclared is DTQ_QUEUES_DECLARED, the queues the API creates at
	// start. Default none.
	QueuesDeclared []string
	// WorkerConcurrency is DTQ_WORKER_CONCURRENCY, handlers run at once by
	// one worker. Default 16.
	WorkerConcurrency int
	// WorkerID is DTQ_WORKER_ID. Default "": the worker makes one up.
	WorkerID string
	// VisibilityTimeout is DTQ_VISIBILITY_TIMEOUT_S, a lease's length. Default 30s.
	VisibilityTimeout time.Duration
	// HeartbeatInterval is DTQ_HEARTBEAT_INTERVAL_S, at most a third of
	// VisibilityTimeout. Default 5s.
	HeartbeatInterval time.Duration
	// MaxQueueDepth is DTQ_MAX_QUEUE_DEPTH, live tasks per queue. Default 10000.
	MaxQueueDepth int64
	// MaxPayloadBytes is DTQ_MAX_PAYLOAD_BYTES. Default 262144.
	MaxPayloadBytes int
	// TaskTimeout is DTQ_TASK_TIMEOUT_MS, the default attempt timeout. Default 30s.
	TaskTimeout time.Duration
	// MaxAttempts is DTQ_MAX_ATTEMPTS, the cap of a task's max_attempts. Default 10.
	MaxAttempts int
	// RetryBaseDelay is DTQ_RETRY_BASE_DELAY, the first backoff. Default 1s.
	RetryBaseDelay time.Duration
	// RetryMaxDelay is DTQ_RETRY_MAX_DELAY, at least RetryBaseDelay. Default 60s.
	RetryMaxDelay time.Duration
	// RetryJitter is DTQ_RETRY_JITTER, the ± fraction applied to a backoff,
	// 0..1. Default 0.2.
	RetryJitter float64
	// SucceededRetention is DTQ_SUCCEEDED_RETENTION, how long a succeeded
	// task is kept; 0 deletes it as it finishes. Default 1h.
	SucceededRetention time.Duration
	// FailedRetention is DTQ_FAILED_RETENTION, how long a failed,
	// dead-lettered (once out of the DLQ index), cancelled or expired task
	// is kept; 0 deletes it as it finishes. Default 7 days.
	FailedRetention time.Duration
	// TaskRetention is DTQ_TASK_RETENTION_S, deprecated: when given, it
	// sets SucceededRetention and FailedRetention where those were not
	// given (Load applies it). 0 when not given.
	TaskRetention time.Duration
	// ResultRetention is DTQ_RESULT_RETENTION_S. Default 1h.
	ResultRetention time.Duration
	// ResultMaxBytes is DTQ_RESULT_MAX_BYTES; larger results are dropped and
	// flagged truncated. Default 8192.
	ResultMaxBytes int
	// IdempotencyTTL is DTQ_IDEM_TTL_S. A task with a key is kept at least
	// as long as its record. Default 24h.
	IdempotencyTTL time.Duration
	// SubmitLinger is DTQ_SUBMIT_LINGER, how long a submission at a steady
	// rate may wait for others to share its Redis call; 0 = never. Default
	// 2ms.
	SubmitLinger time.Duration
	// DrainTimeout is DTQ_DRAIN_TIMEOUT_S, how long a stopping worker waits
	// for running handlers. Default 30s.
	DrainTimeout time.Duration
	// DLQEnabled is DTQ_DLQ_ENABLED; when false, exhausted tasks end failed.
	// Default true.
	DLQEnabled bool
	// ReplicaAcks is DTQ_REPLICA_ACKS: replicas every acknowledged write
	// waits for (0 = none).
	ReplicaAcks int
	// ReplicaAckTimeout is DTQ_REPLICA_ACK_TIMEOUT_MS.
	ReplicaAckTimeout time.Duration
	// DLQMaxLen is DTQ_DLQ_MAXLEN, the dead-letter index cap per queue.
	// Default 10000.
	DLQMaxLen int64
	// EventsMaxLen is DTQ_EVENTS_MAXLEN, the event stream cap per queue.
	// Default 100000.
	EventsMaxLen int64
	// MaxSubscribers is DTQ_MAX_SUBSCRIBERS, the event feed clients one API
	// process serves at once. Default 1000.
	MaxSubscribers int
	// MaxBodyBytesInFlight is DTQ_MAX_BODY_BYTES_IN_FLIGHT, the request
	// body bytes one API process holds at once; more get 503 SERVER_BUSY.
	// Default 67108864 (64 MiB).
	MaxBodyBytesInFlight int64
	// MaxWaits is DTQ_MAX_WAITS, the long-polls (GET /api/v1/tasks/{id}?wait=)
	// one API process holds at once; more get 429 TOO_MANY_WAITS. Default 1000.
	MaxWaits int
	// MaxWaitsPerKey is DTQ_MAX_WAITS_PER_KEY, the same bound per API key
	// (per client address in open mode). Default 100.
	MaxWaitsPerKey int
	// MaxWorkers is DTQ_MAX_WORKERS, the worker records the deployment
	// holds; a new worker id past it is refused. Default 10000.
	MaxWorkers int64
	// MaxWorkersPerKey is DTQ_MAX_WORKERS_PER_KEY, the HTTP workers one API
	// key registers. Default 1000.
	MaxWorkersPerKey int64
	// WorkflowMaxNodes is DTQ_WORKFLOW_MAX_NODES, the nodes a workflow
	// holds and one fan-out call adds. Default 10000.
	WorkflowMaxNodes int64
	// MetricsMaxQueues is DTQ_METRICS_MAX_QUEUES, the queues with their own
	// gauges (and submission counter label) on the API's /metrics; 0 = totals
	// only. Default 100.
	MetricsMaxQueues int
	// APIKey is DTQ_API_KEY, the legacy single admin key. Default none.
	APIKey string
	// APIKeys is DTQ_API_KEYS (role:name:secret,...). Default none.
	APIKeys []access.Key
	// LeaseSecret is DTQ_LEASE_SECRET, the key HTTP workers' lease tokens
	// are authenticated with. Default none: the deployment's secret in Redis.
	LeaseSecret string
	// AllowedHosts is DTQ_ALLOWED_HOSTS, the Host names an API in open mode
	// answers besides localhost and loopback addresses. Default none.
	AllowedHosts []string
	// LogLevel is DTQ_LOG_LEVEL: debug, info, warn or error. Default info.
	LogLevel string
	// LogJSON is DTQ_LOG_JSON: JSON logs instead of text. Default false.
	LogJSON bool
	// LogRequests is DTQ_LOG_REQUESTS: every API request line at INFO.
	// Default false: successful requests are logged at DEBUG.
	LogRequests bool
	// TaskTypes is DTQ_TASK_TYPES, the task types the API accepts. Default
	// none: any type.
	TaskTypes []string
	// WorkerMetricsAddr is DTQ_WORKER_METRICS_ADDR, where a worker serves
	// /metrics, /health and /ready; "off" serves none. Default 127.0.0.1:9464,
	// or a free port when that is taken and the variable was not set.
	WorkerMetricsAddr string

	set map[string]bool // variables given by flag or environment
}

// QueueWeight is one entry of DTQ_QUEUES.
type QueueWeight struct {
	Name   string
	Weight int // 1..1000
}

// Error reports one bad configuration value. Its message names the variable,
// the flag and what is accepted.
type Error struct {
	Var      string // e.g. DTQ_MAX_QUEUE_DEPTH
	Flag     string // e.g. --max-queue-depth
	Value    string // as given; redacted for secrets
	FromFlag bool   // the value came from the flag rather than the environment
	Reason   string // what is accepted
}

// Error returns the one-line message: the variable (or flag) and its value,
// what is accepted, and the other name of the setting.
func (e *Error) Error() string {
	if e.FromFlag {
		return fmt.Sprintf("%s=%s: %s (%s)", e.Flag, e.Value, e.Reason, e.Var)
	}
	return fmt.Sprintf("%s=%s: %s (flag %s)", e.Var, e.Value, e.Reason, e.Flag)
}

// IsSet reports whether the variable name (with or without the DTQ_ prefix)
// was given by flag or environment rather than left at its default.
func (c *Config) IsSet(name string) bool {
	return c.set[strings.TrimPrefix(name, EnvPrefix)]
}

// QueueNames returns the names in Queues, in order.
func (c *Config) QueueNames() []string {
	out := make([]string, len(c.Queues))
	for i, q := range c.Queues {
		out[i] = q.Name
	}
	return out
}

// QueueWeights returns Queues as a map of name to weight.
func (c *Config) QueueWeights() map[string]int {
	out := make(map[string]int, len(c.Queues))
	for _, q := range c.Queues {
		out[q.Name] = q.Weight
	}
	return out
}

// Keys returns the API keys: DTQ_API_KEYS plus DTQ_API_KEY as an admin key.
// None means open mode.
func (c *Config) Keys() []access.Key {
	keys := append([]access.Key(nil), c.APIKeys...)
	if c.APIKey != "" {
		keys = append(keys, access.AdminKey(c.APIKey))
	}
	return keys
}

// flagName is the flag of a variable: MAX_QUEUE_DEPTH → max-queue-depth.
func flagName(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// RegisterFlags adds a flag for every variable to fs. Flags are parsed as
// plain text here and validated by Load, so a bad flag value gets the same
// message as a bad environment value.
func RegisterFlags(fs *pflag.FlagSet) {
	for _, v := range variables {
		fv := &flagValue{s: v.def, typ: v.kind}
		f := fs.VarPF(fv, flagName(v.name), v.short, v.usage+" (env "+EnvPrefix+v.name+")")
		f.DefValue = v.def
		if v.kind == "bool" {
			f.NoOptDefVal = "true"
		}
	}
}

// flagValue holds a flag's text until Load validates it.
type flagValue struct {
	s   string
	typ string
}

func (f *flagValue) String() string { return f.s }

func (f *flagValue) Set(s string) error { f.s = s; return nil }

func (f *flagValue) Type() string { return f.typ }

// LookupEnv is the signature of os.LookupEnv.
type LookupEnv func(key string) (string, bool)

// Load reads every variable: the flag if it was given on the command line
// (fs may be nil, and may lack some flags), else the environment through
// lookup (an empty value counts as unset), else the default. It returns the
// first invalid value as an *Error.
func Load(fs *pflag.FlagSet, lookup LookupEnv) (*Config, error) {
	c := &Config{set: map[string]bool{}}
	for _, v := range variables {
		raw, fromFlag, given := v.def, false, false
		if fs != nil {
			if f := fs.Lookup(flagName(v.name)); f != nil && f.Changed {
				raw, fromFlag, given = f.Value.String(), true, true
			}
		}
		if !given && lookup != nil {
			if s, ok := lookup(EnvPrefix + v.name); ok && s != "" {
				raw, given = s, true
			}
		}
		c.set[v.name] = given
		if err := v.parse(c, raw); err != nil {
			return nil, v.error(raw, fromFlag, err.Error())
		}
	}
	if err := c.crossCheck(fs); err != nil {
		return nil, err
	}
	return c, nil
}

// Default returns the configuration with every variable at its default.
func Default() *Config {
	c, err := Load(nil, nil)
	if err != nil {
		panic("config: a default is invalid: " + err.Error())
	}
	return c
}

// crossCheck applies the rules that relate two variables.
func (c *Config) crossCheck(fs *pflag.FlagSet) error {
	fail := func(name, value, reason string) error {
		v := lookupVar(name)
		fromFlag := false
		if fs != nil {
			if f := fs.Lookup(flagName(name)); f != nil && f.Changed {
				fromFlag = true
			}
		}
		return v.error(value, fromFlag, reason)
	}
	if c.HeartbeatInterval*3 > c.VisibilityTimeout {
		return fail("HEARTBEAT_INTERVAL_S", secs(c.HeartbeatInterval), fmt.Sprintf(
			"must be at most a third of DTQ_VISIBILITY_TIMEOUT_S (%s), so at most %d",
			secs(c.VisibilityTimeout), c.VisibilityTimeout/time.Second/3))
	}
	if c.RetryMaxDelay < c.RetryBaseDelay {
		return fail("RETRY_MAX_DELAY", c.RetryMaxDelay.String(), fmt.Sprintf(
			"must be at least DTQ_RETRY_BASE_DELAY (%s)", c.RetryBaseDelay))
	}
	if c.set["TASK_RETENTION_S"] {
		if !c.set["SUCCEEDED_RETENTION"] {
			c.SucceededRetention = c.TaskRetention
		}
		if !c.set["FAILED_RETENTION"] {
			c.FailedRetention = c.TaskRetention
		}
	}
	for _, k := range c.APIKeys {
		if c.APIKey != "" && k.Secret == c.APIKey {
			return fail("API_KEY", c.APIKey, "must differ from every secret in DTQ_API_KEYS")
		}
	}
	return nil
}

func secs(d time.Duration) string { return fmt.Sprint(int64(d / time.Second)) }

// Deprecations returns a warning for each deprecated variable that was
// given, for the process to log at start.
func (c *Config) Deprecations() []string {
	var out []string
	if c.set["TASK_RETENTION_S"] {
		out = append(out, fmt.Sprintf("DTQ_TASK_RETENTION_S is deprecated; use DTQ_SUCCEEDED_RETENTION and DTQ_FAILED_RETENTION "+
			"(now in effect: succeeded %s, failed %s)", c.SucceededRetention, c.FailedRetention))
	}
	return out
}

// variable describes one DTQ_* setting.
type variable struct {
	name   string // without DTQ_
	short  string // one-letter flag, or ""
	kind   string // shown in --help: int, duration, bool, string, …
	def    string
	usage  string
	redact func(string) string // hides secrets in messages; nil = show as is
	parse  func(c *Config, s string) error
}

func (v *variable) error(raw string, fromFlag bool, reason string) *Error {
	value := fmt.Sprintf("%q", raw)
	if v.redact != nil {
		value = v.redact(raw)
	}
	return &Error{Var: EnvPrefix + v.name, Flag: "--" + flagName(v.name), Value: value, FromFlag: fromFlag, Reason: reason}
}

func lookupVar(name string) *variable {
	for i := range variables {
		if variables[i].name == name {
			return &variables[i]
		}
	}
	panic("config: unknown variable " + name)
}

// Names returns every variable's name with its DTQ_ prefix, in the order
// they are documented.
func Names() []string {
	out := make([]string, len(variables))
	for i, v := range variables {
		out[i] = EnvPrefix + v.name
	}
	return out
}
