package config

import (
	"fmt"
	"math"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/access"
)

// Ranges enforced by Load; docs/configuration.md lists them.
const (
	maxDepth       = 100_000_000
	maxPayload     = 16 << 20
	maxResult      = 16 << 20
	maxRetentionS  = 366 * 24 * 3600
	maxVisibilityS = 24 * 3600
	maxDrainS      = 3600
	maxRetryDelay  = 7 * 24 * time.Hour
	maxConcurrency = 10_000
	maxQueueWeight = 1000
)

var (
	keyPrefixRe = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
	workerIDRe  = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`)
	taskTypeRe  = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
)

// Queue policies (DTQ_QUEUE_POLICY).
const (
	QueuePolicyOpen     = "open"
	QueuePolicyDeclared = "declared"
)

// variables lists every setting docs/configuration.md lists, in documentation order.
var variables = []variable{
	{name: "REDIS_URL", kind: "url", def: "redis://127.0.0.1:6379/0",
		usage:  "Redis to use: redis://, rediss://, redis+sentinel://, redis+cluster://",
		redact: func(s string) string { return fmt.Sprintf("%q", RedactURL(s)) },
		parse: func(c *Config, s string) error {
			if _, err := ParseRedisURL(s); err != nil {
				return err
			}
			c.RedisURL = s
			return nil
		}},
	{name: "KEY_PREFIX", kind: "string", def: "dtq", usage: "prefix of every Redis key",
		parse: func(c *Config, s string) error {
			if !keyPrefixRe.MatchString(s) {
				return fmt.Errorf("must be 1..64 characters of A-Z a-z 0-9 _ . : - (no braces)")
			}
			c.KeyPrefix = s
			return nil
		}},
	{name: "API_ADDR", kind: "host:port", def: "127.0.0.1:8080", usage: "address the API listens on",
		parse: addr(func(c *Config) *string { return &c.APIAddr })},
	{name: "QUEUES", short: "q", kind: "list", def: "default",
		usage: "queues a worker serves, name[:weight],... e.g. critical:6,default:3,low:1",
		parse: func(c *Config, s string) error {
			qs, err := ParseQueues(s)
			c.Queues = qs
			return err
		}},
	{name: "QUEUE_POLICY", kind: "string", def: QueuePolicyOpen, usage: "open: the first submission creates a queue; declared: only queues an admin created or DTQ_QUEUES_DECLARED lists accept tasks",
		parse: func(c *Config, s string) error {
			switch p := strings.ToLower(strings.TrimSpace(s)); p {
			case QueuePolicyOpen, QueuePolicyDeclared:
				c.QueuePolicy = p
				return nil
			}
			return fmt.Errorf("must be open or declared")
		}},
	{name: "QUEUES_DECLARED", kind: "list", def: "", usage: "queues the API creates at start, comma-separated (for DTQ_QUEUE_POLICY=declared)",
		parse: func(c *Config, s string) error {
			c.QueuesDeclared = nil
			if strings.TrimSpace(s) == "" {
				return nil
			}
			for q := range strings.SplitSeq(s, ",") {
				q = strings.TrimSpace(q)
				if !dtq.ValidQueueName(q) {
					return fmt.Errorf("must be queue names separated by commas; %q does not match ^[a-z0-9][a-z0-9_-]{0,63}$", q)
				}
				c.QueuesDeclared = append(c.QueuesDeclared, q)
			}
			return nil
		}},
	{name: "WORKER_CONCURRENCY", kind: "int", def: "16", usage: "handlers one worker runs at once",
		parse: intIn(1, maxConcurrency, func(c *Config) *int { return &c.WorkerConcurrency })},
	{name: "WORKER_ID", kind: "string", def: "", usage: "worker id (default: made up from host and pid)",
		parse: func(c *Config, s string) error {
			if s != "" && !workerIDRe.MatchString(s) {
				return fmt.Errorf("must be 1..128 characters of A-Z a-z 0-9 _ . : @ -")
			}
			c.WorkerID = s
			return nil
		}},
	{name: "VISIBILITY_TIMEOUT_S", kind: "seconds", def: "30", usage: "lease length; a silent worker's task is reclaimed after it",
		parse: seconds(3, maxVisibilityS, func(c *Config) *time.Duration { return &c.VisibilityTimeout })},
	{name: "HEARTBEAT_INTERVAL_S", kind: "seconds", def: "5", usage: "lease renewal interval, at most a third of the visibility timeout",
		parse: seconds(1, maxVisibilityS/3, func(c *Config) *time.Duration { return &c.HeartbeatInterval })},
	{name: "MAX_QUEUE_DEPTH", kind: "int", def: "10000", usage: "live tasks per queue before submissions get 429",
		parse: intIn(1, maxDepth, func(c *Config) *int64 { return &c.MaxQueueDepth })},
	{name: "MAX_PAYLOAD_BYTES", kind: "int", def: strconv.Itoa(dtq.DefaultMaxPayloadBytes), usage: "largest payload (compact JSON bytes)",
		parse: intIn(2, maxPayload, func(c *Config) *int { return &c.MaxPayloadBytes })},
	{name: "TASK_TIMEOUT_MS", kind: "ms", def: "30000", usage: "default attempt timeout",
		parse: millis(1, dtq.MaxTimeout.Milliseconds(), func(c *Config) *time.Duration { return &c.TaskTimeout })},
	{name: "MAX_ATTEMPTS", kind: "int", def: "10", usage: "largest max_attempts a task may ask for",
		parse: intIn(1, 1000, func(c *Config) *int { return &c.MaxAttempts })},
	{name: "RETRY_BASE_DELAY", kind: "duration", def: "1s", usage: "first retry backoff, doubled per attempt",
		parse: duration(time.Millisecond, maxRetryDelay, func(c *Config) *time.Duration { return &c.RetryBaseDelay })},
	{name: "RETRY_MAX_DELAY", kind: "duration", def: "60s", usage: "largest retry backoff",
		parse: duration(time.Millisecond, maxRetryDelay, func(c *Config) *time.Duration { return &c.RetryMaxDelay })},
	{name: "RETRY_JITTER", kind: "float", def: "0.2", usage: "± fraction of jitter on each backoff",
		parse: func(c *Config, s string) error {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
				return fmt.Errorf("must be a number between 0 and 1")
			}
			c.RetryJitter = f
			return nil
		}},
	{name: "SUCCEEDED_RETENTION", kind: "duration", def: "1h", usage: "how long a succeeded task is kept (0 = deleted as it finishes)",
		parse: retention(func(c *Config) *time.Duration { return &c.SucceededRetention })},
	{name: "FAILED_RETENTION", kind: "duration", def: "7d",
		usage: "how long a failed, dead-lettered (out of the DLQ), cancelled or expired task is kept (0 = deleted as it finishes)",
		parse: retention(func(c *Config) *time.Duration { return &c.FailedRetention })},
	{name: "TASK_RETENTION_S", kind: "seconds", def: "", usage: "deprecated: sets DTQ_SUCCEEDED_RETENTION and DTQ_FAILED_RETENTION where not given",
		parse: func(c *Config, s string) error {
			if s == "" {
				return nil
			}
			return seconds(0, maxRetentionS, func(c *Config) *time.Duration { return &c.TaskRetention })(c, s)
		}},
	{name: "RESULT_RETENTION_S", kind: "seconds", def: "3600", usage: "how long a task's result is kept",
		parse: seconds(1, maxRetentionS, func(c *Config) *time.Duration { return &c.ResultRetention })},
	{name: "RESULT_MAX_BYTES", kind: "int", def: "8192", usage: "largest stored result; larger ones are flagged truncated",
		parse: intIn(1, maxResult, func(c *Config) *int { return &c.ResultMaxBytes })},
	{name: "IDEM_TTL_S", kind: "seconds", def: "86400", usage: "idempotency record lifetime (a keyed task is kept at least as long)",
		parse: seconds(1, maxRetentionS, func(c *Config) *time.Duration { return &c.IdempotencyTTL })},
	{name: "SUBMIT_LINGER", kind: "duration", def: "2ms", usage: "how long a submission at a steady rate may wait for others to share its Redis call; 0 = never",
		parse: duration(0, dtq.MaxSubmitLinger, func(c *Config) *time.Duration { return &c.SubmitLinger })},
	{name: "DRAIN_TIMEOUT_S", kind: "seconds", def: "30", usage: "how long a stopping worker waits for running handlers",
		parse: seconds(1, maxDrainS, func(c *Config) *time.Duration { return &c.DrainTimeout })},
	{name: "DLQ_ENABLED", kind: "bool", def: "true", usage: "dead-letter exhausted tasks (false: they end failed)",
		parse: boolean(func(c *Config) *bool { return &c.DLQEnabled })},
	{name: "DLQ_MAXLEN", kind: "int", def: "10000", usage: "dead-letter entries kept per queue",
		parse: intIn(1, maxDepth, func(c *Config) *int64 { return &c.DLQMaxLen })},
	{name: "REPLICA_ACKS", kind: "int", def: "0", usage: "replicas every acknowledged write (submission, finalize, admin action) waits for; 0 = none",
		parse: intIn(0, 16, func(c *Config) *int { return &c.ReplicaAcks })},
	{name: "REPLICA_ACK_TIMEOUT_MS", kind: "ms", def: "1000", usage: "how long a write waits for its replica acknowledgements before it is answered 503",
		parse: millis(1, 60000, func(c *Config) *time.Duration { return &c.ReplicaAckTimeout })},
	{name: "EVENTS_MAXLEN", kind: "int", def: strconv.Itoa(dtq.DefaultStreamMaxLen), usage: "events kept per queue",
		parse: intIn(1, maxDepth, func(c *Config) *int64 { return &c.EventsMaxLen })},
	{name: "MAX_WORKERS", kind: "int", def: strconv.Itoa(dtq.DefaultMaxWorkers), usage: "worker records (Go and HTTP workers seen in 24 h) the deployment holds; a new worker id past it is refused (HTTP: 429 TOO_MANY_WORKERS)",
		parse: intIn(1, 10_000_000, func(c *Config) *int64 { return &c.MaxWorkers })},
	{name: "MAX_WORKERS_PER_KEY", kind: "int", def: strconv.Itoa(dtq.DefaultMaxWorkersPerKey), usage: "HTTP worker ids one API key registers; a new one past it gets 429 TOO_MANY_WORKERS",
		parse: intIn(1, 10_000_000, func(c *Config) *int64 { return &c.MaxWorkersPerKey })},
	{name: "WORKFLOW_MAX_NODES", kind: "int", def: "10000", usage: "nodes a workflow holds, and nodes one fan-out call adds; more are refused (400 INVALID_WORKFLOW)",
		parse: intIn(1, 1_000_000, func(c *Config) *int64 { return &c.WorkflowMaxNodes })},
	{name: "MAX_SUBSCRIBERS", kind: "int", def: "1000", usage: "event feed clients (SSE and WebSocket) one API process serves at once; more get 503",
		parse: intIn(1, 1_000_000, func(c *Config) *int { return &c.MaxSubscribers })},
	{name: "MAX_BODY_BYTES_IN_FLIGHT", kind: "int", def: "67108864", usage: "request body bytes one API process holds at once, over all requests; a body that does not fit gets 503 SERVER_BUSY",
		parse: intIn(16<<20, 1<<40, func(c *Config) *int64 { return &c.MaxBodyBytesInFlight })},
	{name: "MAX_WAITS", kind: "int", def: "1000", usage: "long-polls (?wait=) one API process holds at once; more get 429 TOO_MANY_WAITS",
		parse: intIn(1, 1_000_000, func(c *Config) *int { return &c.MaxWaits })},
	{name: "MAX_WAITS_PER_KEY", kind: "int", def: "100", usage: "long-polls one API process holds at once for one API key (one client address in open mode); more get 429 TOO_MANY_WAITS",
		parse: intIn(1, 1_000_000, func(c *Config) *int { return &c.MaxWaitsPerKey })},
	{name: "METRICS_MAX_QUEUES", kind: "int", def: "100", usage: "queues with their own gauges on the API's /metrics (the deepest); totals cover all; 0 = totals only",
		parse: intIn(0, 65535, func(c *Config) *int { return &c.MetricsMaxQueues })},
	{name: "API_KEY", kind: "secret", def: "", usage: "legacy single admin key; prefer DTQ_API_KEYS, and the environment over flags, which ps shows",
		redact: redactSecret,
		parse: func(c *Config, s string) error {
			for _, r := range s {
				if r <= ' ' || r == ',' || r > '~' {
					return fmt.Errorf("must be printable ASCII without spaces or commas")
				}
			}
			c.APIKey = s
			return nil
		}},
	{name: "API_KEYS", kind: "list", def: "", usage: "API keys, role:name:secret[:queues=q1,q2],... with roles reader, producer, worker, admin; prefer the environment over the flag, which ps shows",
		redact: redactSecret,
		parse: func(c *Config, s string) error {
			if s == "" {
				c.APIKeys = nil
				return nil
			}
			keys, err := access.ParseKeys(s)
			if err != nil {
				return fmt.Errorf("must be role:name:secret,... with roles reader, producer, worker or admin: %w", err)
			}
			c.APIKeys = keys
			return nil
		}},
	{name: "LEASE_SECRET", kind: "secret", def: "", usage: "key the lease tokens of HTTP workers are authenticated with (HMAC), the same on every API process; changing it invalidates outstanding tokens; default: one made at random and kept in Redis",
		redact: redactSecret,
		parse: func(c *Config, s string) error {
			c.LeaseSecret = ""
			if s == "" {
				return nil
			}
			if len(s) < dtq.MinLeaseSecretLen || len(s) > 1024 {
				return fmt.Errorf("must be %d..1024 characters, e.g. the output of openssl rand -hex 32", dtq.MinLeaseSecretLen)
			}
			for _, r := range s {
				if r <= ' ' || r > '~' {
					return fmt.Errorf("must be printable ASCII without spaces")
				}
			}
			c.LeaseSecret = s
			return nil
		}},
	{name: "ALLOWED_HOSTS", kind: "list", def: "", usage: "Host names an API without keys answers besides localhost and loopback addresses, comma-separated; * allows any",
		parse: func(c *Config, s string) error {
			c.AllowedHosts = nil
			if strings.TrimSpace(s) == "" {
				return nil
			}
			for h := range strings.SplitSeq(s, ",") {
				h = strings.TrimSpace(h)
				if err := access.ValidateAllowedHost(h); err != nil {
					return fmt.Errorf("must be host names or IP addresses separated by commas, without ports (or *): %w", err)
				}
				c.AllowedHosts = append(c.AllowedHosts, h)
			}
			return nil
		}},
	{name: "LOG_LEVEL", kind: "level", def: "info", usage: "debug, info, warn or error",
		parse: func(c *Config, s string) error {
			l := strings.ToLower(s)
			switch l {
			case "debug", "info", "warn", "error":
				c.LogLevel = l
				return nil
			}
			return fmt.Errorf("must be one of debug, info, warn, error")
		}},
	{name: "LOG_JSON", kind: "bool", def: "false", usage: "log JSON lines instead of text",
		parse: boolean(func(c *Config) *bool { return &c.LogJSON })},
	{name: "LOG_REQUESTS", kind: "bool", def: "false", usage: "log every API request at INFO (default: successful ones at DEBUG, 4xx at INFO, 5xx at WARN)",
		parse: boolean(func(c *Config) *bool { return &c.LogRequests })},
	{name: "TASK_TYPES", kind: "list", def: "", usage: "task types the API accepts, comma-separated (default: any)",
		parse: func(c *Config, s string) error {
			types, err := parseTaskTypes(s)
			c.TaskTypes = types
			return err
		}},
	{name: "WORKER_METRICS_ADDR", kind: "host:port", def: "127.0.0.1:9464", usage: "address a worker serves /metrics, /health and /ready on; off disables (the default taken: a free port, logged)",
		parse: func(c *Config, s string) error {
			if s == "off" {
				c.WorkerMetricsAddr = s
				return nil
			}
			return addr(func(c *Config) *string { return &c.WorkerMetricsAddr })(c, s)
		}},
}

func redactSecret(s string) string {
	if s == "" {
		return `""`
	}
	return "(redacted)"
}

func intIn[T ~int | ~int64](lo, hi int64, field func(*Config) *T) func(*Config, string) error {
	return func(c *Config, s string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer between %d and %d", lo, hi)
		}
		*field(c) = T(n)
		return nil
	}
}

func seconds(lo, hi int64, field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, s string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be a whole number of seconds between %d and %d", lo, hi)
		}
		*field(c) = time.Duration(n) * time.Second
		return nil
	}
}

func millis(lo, hi int64, field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, s string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be a whole number of milliseconds between %d and %d", lo, hi)
		}
		*field(c) = time.Duration(n) * time.Millisecond
		return nil
	}
}

// duration accepts Go syntax (1.5s, 250ms) or bare seconds (1.5).
func duration(lo, hi time.Duration, field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, s string) error {
		d, err := ParseDuration(s)
		if err != nil || d < lo || d > hi {
			return fmt.Errorf("must be a duration between %s and %s, like 1.5s, 250ms or 1.5 (seconds)", lo, hi)
		}
		*field(c) = d
		return nil
	}
}

// retention accepts what duration does, plus whole days (7d), from 0 (keep
// nothing) up to 366 days.
func retention(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, s string) error {
		s = strings.TrimSpace(s)
		var d time.Duration
		var err error
		if days, ok := strings.CutSuffix(s, "d"); ok {
			var n int64
			n, err = strconv.ParseInt(days, 10, 64)
			d = time.Duration(n) * 24 * time.Hour
			if n > maxRetentionS/86400 {
				err = fmt.Errorf("too long")
			}
		} else {
			d, err = ParseDuration(s)
		}
		if err != nil || d < 0 || d > maxRetentionS*time.Second || d%time.Second != 0 {
			return fmt.Errorf("must be whole seconds from 0 to 366 days, like 3600, 90m, 1h or 7d (0 deletes a task as it finishes)")
		}
		*field(c) = d
		return nil
	}
}

// ParseDuration reads a duration in Go syntax (1.5s) or as bare seconds (1.5).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64/int64(time.Second)) {
			return 0, fmt.Errorf("duration %q out of range", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(s)
}

func boolean(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, s string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("must be a boolean: true, false, 1, 0, t or f")
		}
		*field(c) = b
		return nil
	}
}

func addr(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, s string) error {
		_, port, err := net.SplitHostPort(s)
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		if err != nil {
			return fmt.Errorf("must be host:port, like 127.0.0.1:8080 or :8080")
		}
		*field(c) = s
		return nil
	}
}

// ParseQueues reads DTQ_QUEUES: name[:weight],... with valid queue names
// and weights 1..1000 (default 1), each name once.
func ParseQueues(s string) ([]QueueWeight, error) {
	const format = "must be name[:weight],... like critical:6,default:3,low:1"
	var out []QueueWeight
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		name, weight, hasWeight := strings.Cut(part, ":")
		if !dtq.ValidQueueName(name) {
			return nil, fmt.Errorf("%s; queue name %q must match ^[a-z0-9][a-z0-9_-]{0,63}$", format, name)
		}
		w := 1
		if hasWeight {
			n, err := strconv.Atoi(weight)
			if err != nil || n < 1 || n > maxQueueWeight {
				return nil, fmt.Errorf("%s; weight %q of queue %s must be an integer between 1 and %d", format, weight, name, maxQueueWeight)
			}
			w = n
		}
		if seen[name] {
			return nil, fmt.Errorf("%s; queue %s is listed twice", format, name)
		}
		seen[name] = true
		out = append(out, QueueWeight{Name: name, Weight: w})
	}
	return out, nil
}

func parseTaskTypes(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	seen := map[string]bool{}
	for t := range strings.SplitSeq(s, ",") {
		t = strings.TrimSpace(t)
		if !taskTypeRe.MatchString(t) {
			return nil, fmt.Errorf("must be task types separated by commas, each 1..128 characters of A-Z a-z 0-9 _ . : -; %q is not", t)
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}
