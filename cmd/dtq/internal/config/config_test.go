package config_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// load parses args as command-line flags and env as the environment.
func load(t *testing.T, env map[string]string, args ...string) (*config.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	require.NoError(t, fs.Parse(args))
	return config.Load(fs, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := config.Default()
	require.Equal(t, "redis://127.0.0.1:6379/0", c.RedisURL)
	require.Equal(t, "dtq", c.KeyPrefix)
	require.Equal(t, "127.0.0.1:8080", c.APIAddr)
	require.Equal(t, []config.QueueWeight{{Name: "default", Weight: 1}}, c.Queues)
	require.Equal(t, 16, c.WorkerConcurrency)
	require.Empty(t, c.WorkerID)
	require.Equal(t, 30*time.Second, c.VisibilityTimeout)
	require.Equal(t, 5*time.Second, c.HeartbeatInterval)
	require.EqualValues(t, 10000, c.MaxQueueDepth)
	require.Equal(t, 262144, c.MaxPayloadBytes)
	require.Equal(t, 30*time.Second, c.TaskTimeout)
	require.Equal(t, 10, c.MaxAttempts)
	require.Equal(t, time.Second, c.RetryBaseDelay)
	require.Equal(t, time.Minute, c.RetryMaxDelay)
	require.InDelta(t, 0.2, c.RetryJitter, 1e-9)
	require.Equal(t, time.Hour, c.SucceededRetention)
	require.Equal(t, 7*24*time.Hour, c.FailedRetention)
	require.Zero(t, c.TaskRetention)
	require.Empty(t, c.Deprecations())
	require.Equal(t, time.Hour, c.ResultRetention)
	require.Equal(t, 8192, c.ResultMaxBytes)
	require.Equal(t, 24*time.Hour, c.IdempotencyTTL)
	require.Equal(t, 30*time.Second, c.DrainTimeout)
	require.True(t, c.DLQEnabled)
	require.EqualValues(t, 10000, c.DLQMaxLen)
	require.EqualValues(t, 100000, c.EventsMaxLen)
	require.EqualValues(t, 10000, c.MaxWorkers)
	require.EqualValues(t, 1000, c.MaxWorkersPerKey)
	require.EqualValues(t, 10000, c.WorkflowMaxNodes)
	require.Empty(t, c.APIKey)
	require.Empty(t, c.APIKeys)
	require.Empty(t, c.Keys())
	require.Equal(t, "info", c.LogLevel)
	require.False(t, c.LogJSON)
	require.Empty(t, c.TaskTypes)
	require.Equal(t, "127.0.0.1:9464", c.WorkerMetricsAddr)
	require.Equal(t, 1000, c.MaxSubscribers)
	require.EqualValues(t, 64<<20, c.MaxBodyBytesInFlight)
	require.Equal(t, 1000, c.MaxWaits)
	require.Equal(t, 100, c.MaxWaitsPerKey)
	require.Equal(t, 100, c.MetricsMaxQueues)
	require.Equal(t, 2*time.Millisecond, c.SubmitLinger)
	require.Equal(t, 2*time.Millisecond, c.ClientConfig().SubmitLinger)
	require.Equal(t, config.QueuePolicyOpen, c.QueuePolicy)
	require.False(t, c.ClientConfig().DeclaredQueuesOnly)
	for _, name := range config.Names() {
		require.False(t, c.IsSet(name), name)
	}
}

func TestEveryVariableHasAFlag(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	require.Len(t, config.Names(), 47)
	for _, name := range config.Names() {
		flag := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "DTQ_")), "_", "-")
		f := fs.Lookup(flag)
		require.NotNil(t, f, "flag --%s for %s", flag, name)
		require.Contains(t, f.Usage, name)
	}
	require.NotNil(t, fs.ShorthandLookup("q"))
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want int64
		set  bool
	}{
		{"default", nil, nil, 10000, false},
		{"env", map[string]string{"DTQ_MAX_QUEUE_DEPTH": "50"}, nil, 50, true},
		{"empty env is unset", map[string]string{"DTQ_MAX_QUEUE_DEPTH": ""}, nil, 10000, false},
		{"flag", nil, []string{"--max-queue-depth=70"}, 70, true},
		{"flag beats env", map[string]string{"DTQ_MAX_QUEUE_DEPTH": "50"}, []string{"--max-queue-depth", "70"}, 70, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tt.env, tt.args...)
			require.NoError(t, err)
			require.Equal(t, tt.want, c.MaxQueueDepth)
			require.Equal(t, tt.set, c.IsSet("DTQ_MAX_QUEUE_DEPTH"))
			require.Equal(t, tt.set, c.IsSet("MAX_QUEUE_DEPTH"))
		})
	}
}

func TestRetentionVariables(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	tests := []struct {
		name              string
		env               map[string]string
		succeeded, failed time.Duration
		deprecated        bool
		bad               string // the variable an error names
	}{
		{"defaults", nil, time.Hour, 7 * day, false, ""},
		{"seconds", map[string]string{"DTQ_SUCCEEDED_RETENTION": "3600", "DTQ_FAILED_RETENTION": "86400"}, time.Hour, day, false, ""},
		{"go syntax and days", map[string]string{"DTQ_SUCCEEDED_RETENTION": "90m", "DTQ_FAILED_RETENTION": "30d"}, 90 * time.Minute, 30 * day, false, ""},
		{"zero keeps nothing", map[string]string{"DTQ_SUCCEEDED_RETENTION": "0"}, 0, 7 * day, false, ""},
		{"alias sets both", map[string]string{"DTQ_TASK_RETENTION_S": "7200"}, 2 * time.Hour, 2 * time.Hour, true, ""},
		{"explicit beats alias", map[string]string{"DTQ_TASK_RETENTION_S": "7200", "DTQ_FAILED_RETENTION": "1d"}, 2 * time.Hour, day, true, ""},
		{"negative", map[string]string{"DTQ_SUCCEEDED_RETENTION": "-1s"}, 0, 0, false, "DTQ_SUCCEEDED_RETENTION"},
		{"fraction of a second", map[string]string{"DTQ_FAILED_RETENTION": "1.5"}, 0, 0, false, "DTQ_FAILED_RETENTION"},
		{"past 366 days", map[string]string{"DTQ_FAILED_RETENTION": "367d"}, 0, 0, false, "DTQ_FAILED_RETENTION"},
		{"not a duration", map[string]string{"DTQ_SUCCEEDED_RETENTION": "a week"}, 0, 0, false, "DTQ_SUCCEEDED_RETENTION"},
		{"alias out of range", map[string]string{"DTQ_TASK_RETENTION_S": "1h"}, 0, 0, false, "DTQ_TASK_RETENTION_S"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tt.env)
			if tt.bad != "" {
				var cerr *config.Error
				require.ErrorAs(t, err, &cerr)
				require.Equal(t, tt.bad, cerr.Var)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.succeeded, c.SucceededRetention)
			require.Equal(t, tt.failed, c.FailedRetention)
			require.Equal(t, tt.deprecated, len(c.Deprecations()) == 1)
			dc := c.DeploymentConfig()
			if tt.succeeded == 0 {
				require.Equal(t, dtq.NoRetention, dc.SucceededRetention)
			} else {
				require.Equal(t, tt.succeeded, dc.SucceededRetention)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		check func(t *testing.T, c *config.Config)
	}{
		{"declared queues", map[string]string{"DTQ_QUEUE_POLICY": "Declared", "DTQ_QUEUES_DECLARED": "billing, invoices"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, config.QueuePolicyDeclared, c.QueuePolicy)
				require.Equal(t, []string{"billing", "invoices"}, c.QueuesDeclared)
				require.True(t, c.ClientConfig().DeclaredQueuesOnly)
			}},
		{"allowed hosts", map[string]string{"DTQ_ALLOWED_HOSTS": " dtq.internal , 10.0.0.7 "}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, []string{"dtq.internal", "10.0.0.7"}, c.AllowedHosts)
			}},
		{"submit linger off", map[string]string{"DTQ_SUBMIT_LINGER": "0"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Zero(t, c.SubmitLinger)
				require.Negative(t, c.ClientConfig().SubmitLinger, "0 is never waiting, not the library's default")
			}},
		{"submit linger", map[string]string{"DTQ_SUBMIT_LINGER": "500us"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, 500*time.Microsecond, c.ClientConfig().SubmitLinger)
			}},
		{"durations in Go syntax", map[string]string{"DTQ_RETRY_BASE_DELAY": "250ms", "DTQ_RETRY_MAX_DELAY": "1m30s"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, 250*time.Millisecond, c.RetryBaseDelay)
				require.Equal(t, 90*time.Second, c.RetryMaxDelay)
			}},
		{"durations in bare seconds", map[string]string{"DTQ_RETRY_BASE_DELAY": "1.5", "DTQ_RETRY_MAX_DELAY": "120"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, 1500*time.Millisecond, c.RetryBaseDelay)
				require.Equal(t, 2*time.Minute, c.RetryMaxDelay)
			}},
		{"seconds and milliseconds", map[string]string{"DTQ_VISIBILITY_TIMEOUT_S": "60", "DTQ_HEARTBEAT_INTERVAL_S": "20", "DTQ_TASK_TIMEOUT_MS": "1500"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, time.Minute, c.VisibilityTimeout)
				require.Equal(t, 20*time.Second, c.HeartbeatInterval)
				require.Equal(t, 1500*time.Millisecond, c.TaskTimeout)
			}},
		{"weighted queues keep their order", nil, []string{"-q", "critical:6, default:3,low"},
			func(t *testing.T, c *config.Config) {
				require.Equal(t, []config.QueueWeight{{"critical", 6}, {"default", 3}, {"low", 1}}, c.Queues)
				require.Equal(t, []string{"critical", "default", "low"}, c.QueueNames())
				require.Equal(t, map[string]int{"critical": 6, "default": 3, "low": 1}, c.QueueWeights())
			}},
		{"booleans", map[string]string{"DTQ_DLQ_ENABLED": "0"}, []string{"--log-json"},
			func(t *testing.T, c *config.Config) {
				require.False(t, c.DLQEnabled)
				require.True(t, c.LogJSON)
			}},
		{"boolean flag with a value", nil, []string{"--dlq-enabled=false"},
			func(t *testing.T, c *config.Config) { require.False(t, c.DLQEnabled) }},
		{"log level any case", map[string]string{"DTQ_LOG_LEVEL": "WARN"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, "warn", c.LogLevel)
				require.Equal(t, slog.LevelWarn, c.Level())
			}},
		{"task types", map[string]string{"DTQ_TASK_TYPES": "echo, sleep,echo,send_receipt"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, []string{"echo", "sleep", "send_receipt"}, c.TaskTypes)
				require.Equal(t, c.TaskTypes, c.ClientConfig().TaskTypes)
			}},
		{"api keys and the legacy key", map[string]string{
			"DTQ_API_KEYS": "reader:dash:r-secret,producer:shop:p-secret", "DTQ_API_KEY": "legacy-secret"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, []httpapi.APIKey{
					{Role: httpapi.RoleReader, Name: "dash", Secret: "r-secret"},
					{Role: httpapi.RoleProducer, Name: "shop", Secret: "p-secret"},
					httpapi.AdminKey("legacy-secret"),
				}, c.Keys())
			}},
		{"lease secret reaches the HTTP-worker service", map[string]string{"DTQ_LEASE_SECRET": strings.Repeat("k", 32)}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, strings.Repeat("k", 32), c.LeaseSecret)
				require.Equal(t, c.LeaseSecret, c.WorkerGatewayConfig(nil).LeaseSecret)
			}},
		{"addresses", map[string]string{"DTQ_API_ADDR": ":0", "DTQ_WORKER_METRICS_ADDR": "[::1]:9000"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, ":0", c.APIAddr)
				require.Equal(t, "[::1]:9000", c.WorkerMetricsAddr)
			}},
		{"worker endpoints off", map[string]string{"DTQ_WORKER_METRICS_ADDR": "off"}, nil,
			func(t *testing.T, c *config.Config) {
				require.Equal(t, "off", c.WorkerMetricsAddr)
			}},
		{"client and deployment config", map[string]string{"DTQ_KEY_PREFIX": "app:dtq", "DTQ_MAX_QUEUE_DEPTH": "7", "DTQ_MAX_PAYLOAD_BYTES": "1024",
			"DTQ_MAX_ATTEMPTS": "3", "DTQ_TASK_TIMEOUT_MS": "2000", "DTQ_IDEM_TTL_S": "60", "DTQ_EVENTS_MAXLEN": "500"}, nil,
			func(t *testing.T, c *config.Config) {
				cc := c.ClientConfig()
				require.EqualValues(t, 7, cc.MaxQueueDepth)
				require.Equal(t, 1024, cc.MaxPayloadBytes)
				require.Equal(t, 3, cc.MaxAttempts)
				require.Equal(t, 2*time.Second, cc.TaskTimeout)
				dc := c.DeploymentConfig()
				require.Equal(t, "app:dtq", dc.KeyPrefix)
				require.Equal(t, time.Minute, dc.IdempotencyTTL)
				require.EqualValues(t, 500, dc.EventsMaxLen)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tt.env, tt.args...)
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestBadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		variable string
		value    string
		want     string // in the message, besides the variable and its flag
	}{
		{"REDIS_URL", "localhost:6379", "must be a Redis URL"},
		{"REDIS_URL", "http://127.0.0.1", "must be a Redis URL"},
		{"REDIS_URL", "redis+sentinel://h1:26379", "/master"},
		{"REDIS_URL", "redis+cluster://h1:7000/3", "database 0"},
		{"KEY_PREFIX", "dtq{x}", "no braces"},
		{"KEY_PREFIX", strings.Repeat("a", 65), "1..64 characters"},
		{"API_ADDR", "8080", "host:port"},
		{"ALLOWED_HOSTS", "dtq.example:8080", "without ports"},
		{"MAX_SUBSCRIBERS", "0", "between 1 and 1000000"},
		{"SUBMIT_LINGER", "1s", "between 0s and 100ms"},
		{"SUBMIT_LINGER", "-1ms", "between 0s and 100ms"},
		{"MAX_WORKERS", "0", "between 1 and 10000000"},
		{"MAX_WORKERS_PER_KEY", "-1", "between 1 and 10000000"},
		{"METRICS_MAX_QUEUES", "-1", "between 0 and 65535"},
		{"QUEUE_POLICY", "closed", "open or declared"},
		{"QUEUES_DECLARED", "billing,Bad", "does not match"},
		{"ALLOWED_HOSTS", "a,,b", "1..253 characters"},
		{"API_ADDR", "127.0.0.1:99999", "host:port"},
		{"QUEUES", "Default", "queue name"},
		{"QUEUES", "a:0", "between 1 and 1000"},
		{"QUEUES", "a:1001", "between 1 and 1000"},
		{"QUEUES", "a,,b", "queue name"},
		{"QUEUES", "a,b,a", "listed twice"},
		{"WORKER_CONCURRENCY", "0", "between 1 and 10000"},
		{"WORKER_ID", "has space", "1..128 characters"},
		{"VISIBILITY_TIMEOUT_S", "2", "between 3 and 86400"},
		{"VISIBILITY_TIMEOUT_S", "1.5", "whole number of seconds"},
		{"HEARTBEAT_INTERVAL_S", "0", "between 1 and 28800"},
		{"MAX_QUEUE_DEPTH", "abc", "must be an integer between 1 and 100000000"},
		{"MAX_QUEUE_DEPTH", "100000001", "between 1 and 100000000"},
		{"MAX_PAYLOAD_BYTES", "-1", "between 2 and 16777216"},
		{"TASK_TIMEOUT_MS", "3600001", "milliseconds between 1 and 3600000"},
		{"MAX_ATTEMPTS", "1001", "between 1 and 1000"},
		{"RETRY_BASE_DELAY", "fast", "duration between 1ms and 168h0m0s"},
		{"RETRY_BASE_DELAY", "0", "duration between"},
		{"RETRY_MAX_DELAY", "NaN", "duration between"},
		{"RETRY_JITTER", "1.5", "between 0 and 1"},
		{"RETRY_JITTER", "-0.1", "between 0 and 1"},
		{"TASK_RETENTION_S", "-1", "between 0 and"},
		{"SUCCEEDED_RETENTION", "1w", "like 3600, 90m, 1h or 7d"},
		{"RESULT_RETENTION_S", "1h", "whole number of seconds"},
		{"RESULT_MAX_BYTES", "0", "between 1 and 16777216"},
		{"IDEM_TTL_S", "x", "whole number of seconds"},
		{"DRAIN_TIMEOUT_S", "3601", "between 1 and 3600"},
		{"DLQ_ENABLED", "yes", "boolean"},
		{"DLQ_MAXLEN", "0", "between 1 and"},
		{"EVENTS_MAXLEN", "1e5", "integer"},
		{"API_KEY", "has space", "printable ASCII"},
		{"API_KEYS", "root:me:secret", "role:name:secret"},
		{"API_KEYS", "admin:me", "role:name:secret"},
		{"LEASE_SECRET", "short", "32..1024 characters"},
		{"LEASE_SECRET", strings.Repeat("x", 1025), "32..1024 characters"},
		{"LEASE_SECRET", strings.Repeat("x", 32) + " y", "printable ASCII"},
		{"LOG_LEVEL", "verbose", "debug, info, warn, error"},
		{"LOG_JSON", "maybe", "boolean"},
		{"TASK_TYPES", "echo,bad type", "task types"},
		{"WORKER_METRICS_ADDR", "localhost", "host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			flag := "--" + strings.ReplaceAll(strings.ToLower(tt.variable), "_", "-")

			_, err := load(t, map[string]string{"DTQ_" + tt.variable: tt.value})
			require.Error(t, err)
			var cerr *config.Error
			require.True(t, errors.As(err, &cerr))
			require.Equal(t, "DTQ_"+tt.variable, cerr.Var)
			require.False(t, cerr.FromFlag)
			require.True(t, strings.HasPrefix(err.Error(), "DTQ_"+tt.variable+"="), err.Error())
			require.Contains(t, err.Error(), flag)
			require.Contains(t, err.Error(), tt.want)

			_, err = load(t, nil, flag+"="+tt.value)
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), flag+"="), err.Error())
			require.Contains(t, err.Error(), "DTQ_"+tt.variable)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := load(t, map[string]string{"DTQ_MAX_QUEUE_DEPTH": "abc"})
	require.EqualError(t, err, `DTQ_MAX_QUEUE_DEPTH="abc": must be an integer between 1 and 100000000 (flag --max-queue-depth)`)
	_, err = load(t, nil, "--max-queue-depth=abc")
	require.EqualError(t, err, `--max-queue-depth="abc": must be an integer between 1 and 100000000 (DTQ_MAX_QUEUE_DEPTH)`)
}

func TestSecretsStayOutOfMessages(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{"DTQ_API_KEYS": "admin:ops:s3cr3t,bogus:x:s3cr3t"},
		{"DTQ_API_KEYS": "s3cr3t:admin:ops"},
		{"DTQ_API_KEY": "s3cr3t with space"},
		{"DTQ_API_KEYS": "admin:ops:s3cr3t", "DTQ_API_KEY": "s3cr3t"},
		{"DTQ_REDIS_URL": "redis://user:s3cr3t@host:port/0"},
		{"DTQ_REDIS_URL": "ftp://user:s3cr3t@host/"},
		{"DTQ_REDIS_URL": "redis+sentinel://user:s3cr3t@h1:26379"},
		{"DTQ_LEASE_SECRET": "s3cr3t"},
		{"DTQ_LEASE_SECRET": "s3cr3t" + strings.Repeat("x", 40) + "\t"},
	} {
		_, err := load(t, env)
		require.Error(t, err)
		require.NotContains(t, err.Error(), "s3cr3t")
	}
}

func TestCrossFieldRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		variable string
		want     string
	}{
		{"heartbeat over a third of visibility", map[string]string{"DTQ_VISIBILITY_TIMEOUT_S": "30", "DTQ_HEARTBEAT_INTERVAL_S": "11"}, nil,
			"DTQ_HEARTBEAT_INTERVAL_S", "at most a third of DTQ_VISIBILITY_TIMEOUT_S (30), so at most 10"},
		{"visibility lowered under the default heartbeat", nil, []string{"--visibility-timeout-s=12"},
			"DTQ_HEARTBEAT_INTERVAL_S", "so at most 4"},
		{"max delay under base delay", map[string]string{"DTQ_RETRY_BASE_DELAY": "10s", "DTQ_RETRY_MAX_DELAY": "5"}, nil,
			"DTQ_RETRY_MAX_DELAY", "at least DTQ_RETRY_BASE_DELAY (10s)"},
		{"legacy key reuses a secret", map[string]string{"DTQ_API_KEYS": "admin:ops:k1", "DTQ_API_KEY": "k1"}, nil,
			"DTQ_API_KEY", "must differ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tt.env, tt.args...)
			var cerr *config.Error
			require.True(t, errors.As(err, &cerr), "%v", err)
			require.Equal(t, tt.variable, cerr.Var)
			require.Contains(t, err.Error(), tt.want)
		})
	}
	// The limits themselves are fine.
	_, err := load(t, map[string]string{"DTQ_VISIBILITY_TIMEOUT_S": "30", "DTQ_HEARTBEAT_INTERVAL_S": "10",
		"DTQ_RETRY_BASE_DELAY": "5s", "DTQ_RETRY_MAX_DELAY": "5", "DTQ_TASK_RETENTION_S": "60", "DTQ_IDEM_TTL_S": "60"})
	require.NoError(t, err)
}

func TestNewLogger(t *testing.T) {
	t.Parallel()
	var text, js strings.Builder
	c, err := load(t, map[string]string{"DTQ_LOG_LEVEL": "warn"})
	require.NoError(t, err)
	l := c.NewLogger(&text)
	l.Info("hidden")
	l.Warn("shown", "value", "a\nb")
	require.NotContains(t, text.String(), "hidden")
	require.Contains(t, text.String(), `msg=shown value="a\nb"`)

	c, err = load(t, nil, "--log-json", "--log-level=debug")
	require.NoError(t, err)
	c.NewLogger(&js).Debug("dbg", "k", 1)
	require.Contains(t, js.String(), `"msg":"dbg","k":1`)
}

func TestDefaultsMatchDocs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../../docs/configuration.md")
	require.NoError(t, err)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	for _, name := range config.Names() {
		require.Contains(t, string(doc), "`"+name+"`", "docs/configuration.md must describe %s", name)
		flag := fs.Lookup(strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "DTQ_")), "_", "-"))
		require.Contains(t, string(doc), "`--"+flag.Name+"`", "docs/configuration.md must list the flag of %s", name)
	}
}

// TestNewAccessLogger: request lines below 400 are DEBUG unless
// DTQ_LOG_REQUESTS is set; 4xx and 5xx keep their level.
func TestNewAccessLogger(t *testing.T) {
	t.Parallel()
	line := func(l *slog.Logger, level slog.Level, status int) {
		l.LogAttrs(context.Background(), level, "http request", slog.String("path", "/api/v1/tasks"), slog.Int("status", status))
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"default, info", nil, []string{"level=INFO msg=\"http request\" path=/api/v1/tasks status=404", "level=WARN msg=\"http request\" path=/api/v1/tasks status=503"}},
		{"default, debug", []string{"--log-level=debug"}, []string{"level=DEBUG msg=\"http request\" path=/api/v1/tasks status=202",
			"level=INFO msg=\"http request\" path=/api/v1/tasks status=404", "level=WARN msg=\"http request\" path=/api/v1/tasks status=503"}},
		{"DTQ_LOG_REQUESTS", []string{"--log-requests"}, []string{"level=INFO msg=\"http request\" path=/api/v1/tasks status=202",
			"level=INFO msg=\"http request\" path=/api/v1/tasks status=404", "level=WARN msg=\"http request\" path=/api/v1/tasks status=503"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, nil, tt.args...)
			require.NoError(t, err)
			var out strings.Builder
			l := c.NewAccessLogger(&out).With() // With keeps the lowering
			line(l, slog.LevelInfo, 202)
			line(l, slog.LevelInfo, 404)
			line(l, slog.LevelWarn, 503)
			var got []string
			for _, s := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				_, rest, _ := strings.Cut(s, " ") // drop the time
				got = append(got, rest)
			}
			require.Equal(t, tt.want, got)
		})
	}
}
