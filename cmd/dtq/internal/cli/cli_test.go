package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

// TestDevSmoke runs `dtq dev` on each Redis backend and walks through a
// submission, its in-flight replay and a read.
func TestDevSmoke(t *testing.T) {
	t.Parallel()
	shared := redistest.Shared(t)
	tests := []struct {
		name     string
		args     []string
		vars     map[string]string
		describe string
	}{
		{name: "private redis-server", args: []string{"--redis=server"}, describe: "private redis-server, data in "},
		{name: "in-process memory", args: []string{"--redis=memory"}, describe: "in-process miniredis, memory only"},
		{name: "DTQ_REDIS_URL", vars: map[string]string{"DTQ_REDIS_URL": shared.URL(), "DTQ_KEY_PREFIX": redistest.New(t).Prefix},
			describe: shared.URL()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dataDir := filepath.Join(t.TempDir(), ".dtq")
			// A short drain: the sleeping task below is still running at exit.
			args := append([]string{"dev", "--api-addr=127.0.0.1:0", "--data-dir=" + dataDir, "--drain-timeout-s=1"}, tt.args...)
			r := startCmd(t, tt.vars, args...)
			r.waitHealthy(t)

			line := regexp.MustCompile(`^dtq dev: API and dashboard at (http://127\.0\.0\.1:\d+/) \(redis: (.*)\)\n` +
				`dtq dev: Redis at (redis://\S+); point your own clients and workers at it with DTQ_REDIS_URL=(redis://\S+)\n$`).FindStringSubmatch(r.stdout.String())
			require.NotNil(t, line, "startup lines: %q", r.stdout.String())
			require.Equal(t, r.base+"/", line[1])
			require.Contains(t, line[2], tt.describe)
			require.Equal(t, line[3], line[4])
			if tt.vars["DTQ_REDIS_URL"] != "" {
				require.Equal(t, tt.vars["DTQ_REDIS_URL"], line[3])
			}
			// The printed URL reaches the Redis dev uses.
			opt, err := redis.ParseURL(line[3])
			require.NoError(t, err)
			rc := redis.NewClient(opt)
			require.NoError(t, rc.Ping(context.Background()).Err())
			require.NoError(t, rc.Close())

			body := `{"task_type": "sleep", "payload": {"seconds": 30}, "timeout_ms": 60000}`
			key := map[string]string{"Idempotency-Key": "smoke-1"}
			status, _, created := r.do(t, http.MethodPost, "/api/v1/tasks", key, body)
			require.Equal(t, http.StatusAccepted, status, "%v", created)
			require.Equal(t, false, created["duplicate"])
			id, _ := created["task_id"].(string)
			require.Len(t, id, 32)

			// The worker is still sleeping on it, so a replay finds it in flight.
			status, _, conflict := r.do(t, http.MethodPost, "/api/v1/tasks", key, body)
			require.Equal(t, http.StatusConflict, status, "%v", conflict)
			require.Equal(t, "IDEMPOTENCY_IN_PROGRESS", conflict["code"])
			require.Equal(t, id, conflict["details"].(map[string]any)["task_id"])

			status, _, got := r.do(t, http.MethodGet, "/api/v1/tasks/"+id, nil, "")
			require.Equal(t, http.StatusOK, status, "%v", got)
			require.Equal(t, id, got["task_id"])
			require.Equal(t, "sleep", got["task_type"])
			require.Contains(t, []any{"queued", "running"}, got["status"])
			require.Equal(t, "smoke-1", got["idempotency_key"])

			// The dashboard's overview reads the queue list on every backend
			// (the in-process one reports no memory figures).
			status, _, queues := r.do(t, http.MethodGet, "/api/v1/queues", nil, "")
			require.Equal(t, http.StatusOK, status, "%v", queues)

			// The event feed is mounted: subscribe before the echo is
			// submitted, then its whole lifecycle must come through.
			evCtx, cancelEv := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancelEv()
			req, err := http.NewRequestWithContext(evCtx, http.MethodGet, r.base+"/api/v1/events?queue=default", nil)
			require.NoError(t, err)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.Equal(t, "text/event-stream", strings.Split(res.Header.Get("Content-Type"), ";")[0])

			// The worker runs an echo to completion; then the key replays it.
			echo := `{"task_type": "echo", "payload": {"hello": "world"}}`
			key2 := map[string]string{"Idempotency-Key": "smoke-2"}
			status, _, created = r.do(t, http.MethodPost, "/api/v1/tasks", key2, echo)
			require.Equal(t, http.StatusAccepted, status, "%v", created)
			echoID, _ := created["task_id"].(string)
			status, _, got = r.do(t, http.MethodGet, "/api/v1/tasks/"+echoID+"?wait=20s", nil, "")
			require.Equal(t, http.StatusOK, status, "%v", got)
			require.Equal(t, "succeeded", got["status"], "%v", got)
			require.Equal(t, map[string]any{"hello": "world"}, got["result"])
			sc := bufio.NewScanner(res.Body)
			var seen []string
			for sc.Scan() && !slices.Contains(seen, "TASK_SUCCEEDED") {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, echoID) {
					var env struct{ Type string }
					require.NoError(t, json.Unmarshal([]byte(data), &env))
					seen = append(seen, env.Type)
				}
			}
			require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"}, seen)
			status, hdr, replay := r.do(t, http.MethodPost, "/api/v1/tasks", key2, echo)
			require.Equal(t, http.StatusOK, status, "%v", replay)
			require.Equal(t, true, replay["duplicate"])
			require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))

			// dev accepts any task type: one of the user's own, on a queue
			// dev's worker does not serve, waits for the user's worker.
			status, _, own := r.do(t, http.MethodPost, "/api/v1/tasks", nil, `{"task_type": "resize", "queue": "images"}`)
			require.Equal(t, http.StatusAccepted, status, "%v", own)

			// The dashboard is served at / next to the API.
			page, err := http.Get(r.base + "/")
			require.NoError(t, err)
			pageBody, _ := io.ReadAll(page.Body)
			page.Body.Close()
			require.Equal(t, http.StatusOK, page.StatusCode)
			require.Contains(t, string(pageBody), "<title>")

			status, _, ready := r.do(t, http.MethodGet, "/ready", nil, "")
			require.Equal(t, http.StatusOK, status, "/ready: %v", ready)

			require.Equal(t, 0, r.stop(t), "stderr:\n%s", r.stderr)
			// The stop says what it waits for: the sleep is still running.
			require.Contains(t, r.stderr.String(), "press Ctrl-C again to quit at once")
			require.Contains(t, r.stderr.String(), "draining 1 running task, up to 1 s")
			if strings.Contains(tt.describe, "redis-server") {
				_, err := os.Stat(filepath.Join(dataDir, "appendonlydir"))
				require.NoError(t, err, "the AOF lives in the data directory")
			} else {
				_, err := os.Stat(dataDir)
				require.True(t, os.IsNotExist(err), "only the private redis-server writes a data directory")
			}
		})
	}
}

func TestAPIServes(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	r := startCmd(t, map[string]string{"DTQ_REDIS_URL": srv.URL(), "DTQ_KEY_PREFIX": "apiserves", "DTQ_TASK_TYPES": "resize"},
		"api", "--api-addr", "127.0.0.1:0")
	r.waitHealthy(t)
	require.Contains(t, r.stderr.String(), "open mode")

	status, _, created := r.do(t, http.MethodPost, "/api/v1/tasks", nil, `{"task_type": "resize", "queue": "images"}`)
	require.Equal(t, http.StatusAccepted, status, "%v", created)
	status, _, refused := r.do(t, http.MethodPost, "/api/v1/tasks", nil, `{"task_type": "echo"}`)
	require.Equal(t, http.StatusBadRequest, status, "DTQ_TASK_TYPES limits the types")
	require.Equal(t, "UNKNOWN_TASK_TYPE", refused["code"])
	require.Contains(t, refused["message"], "DTQ_TASK_TYPES", "the refusal names the setting")
	code, _, stderr := runCmd(t, map[string]string{"DTQ_API_URL": r.base}, "schedules", "put", "nightly", "--spec", "@daily", "--type", "report")
	require.Equal(t, exitFailure, code)
	require.Contains(t, stderr, "INVALID_REQUEST: task_type: ")
	require.Contains(t, stderr, "DTQ_TASK_TYPES", "a schedule's refusal names the setting too")
	require.Equal(t, 0, r.stop(t))
	require.Contains(t, r.stderr.String(), "API shutting down")
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	r := startCmd(t, map[string]string{"DTQ_REDIS_URL": srv.URL(), "DTQ_KEY_PREFIX": "apikeys",
		"DTQ_API_KEYS": "reader:dash:read-secret", "DTQ_API_KEY": "legacy-secret"}, "api", "--api-addr=127.0.0.1:0")
	r.waitHealthy(t)
	require.NotContains(t, r.stderr.String(), "open mode")
	require.NotContains(t, r.stderr.String(), "secret")

	body := `{"task_type": "echo"}`
	status, _, _ := r.do(t, http.MethodPost, "/api/v1/tasks", nil, body)
	require.Equal(t, http.StatusUnauthorized, status)
	status, _, _ = r.do(t, http.MethodPost, "/api/v1/tasks", map[string]string{"Authorization": "Bearer read-secret"}, body)
	require.Equal(t, http.StatusForbidden, status)
	status, _, _ = r.do(t, http.MethodPost, "/api/v1/tasks", map[string]string{"Authorization": "Bearer legacy-secret"}, body)
	require.Equal(t, http.StatusAccepted, status)
}

func TestAPIWarnsLoudlyOnOpenNonLoopback(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	r := startCmd(t, map[string]string{"DTQ_REDIS_URL": srv.URL(), "DTQ_KEY_PREFIX": "apiopen"}, "api", "--api-addr=0.0.0.0:0")
	require.Contains(t, r.stderr.String(), "UNAUTHENTICATED AND LISTENS ON A NON-LOOPBACK ADDRESS")
	require.Equal(t, 0, r.stop(t))
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		vars map[string]string
		args []string
		want string // the whole stderr
	}{
		{"bad env value", map[string]string{"DTQ_MAX_QUEUE_DEPTH": "abc"}, []string{"api"},
			`dtq: DTQ_MAX_QUEUE_DEPTH="abc": must be an integer between 1 and 100000000 (flag --max-queue-depth)` + "\n"},
		{"bad flag value", nil, []string{"api", "--log-level=loud"},
			`dtq: --log-level="loud": must be one of debug, info, warn, error (DTQ_LOG_LEVEL)` + "\n"},
		{"cross-field rule", map[string]string{"DTQ_HEARTBEAT_INTERVAL_S": "20"}, []string{"dev"},
			`dtq: DTQ_HEARTBEAT_INTERVAL_S="20": must be at most a third of DTQ_VISIBILITY_TIMEOUT_S (30), so at most 10 (flag --heartbeat-interval-s)` + "\n"},
		{"bad queues", map[string]string{"DTQ_QUEUES": "a:0"}, []string{"dev"}, "DTQ_QUEUES"},
		{"bad redis url", map[string]string{"DTQ_REDIS_URL": "redis://u:hunter2@h:x/0"}, []string{"api"}, "DTQ_REDIS_URL"},
		{"bad dev backend", nil, []string{"dev", "--redis=disk"}, `dtq: --redis="disk": must be auto, server or memory` + "\n"},
		{"unknown flag", nil, []string{"api", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{"unknown command", nil, []string{"launch"}, `unknown command "launch"`},
		{"stray argument", nil, []string{"api", "extra"}, `unknown command "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCmd(t, tt.vars, tt.args...)
			require.Equal(t, 2, code, stderr)
			require.Empty(t, stdout)
			require.True(t, strings.HasPrefix(stderr, "dtq: "), stderr)
			if !strings.Contains(stderr, "Did you mean this?") { // suggestions keep their own lines
				require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			}
			require.NotContains(t, stderr, "hunter2")
			if strings.HasSuffix(tt.want, "\n") {
				require.Equal(t, tt.want, stderr)
			} else {
				require.Contains(t, stderr, tt.want)
			}
		})
	}
}

// TestErrorKeepsItsLines checks that a mistyped command prints cobra's
// suggestion as written, lines and all.
func TestErrorKeepsItsLines(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCmd(t, nil, "task", "list")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "dtq: unknown command \"task\" for \"dtq\"\n\nDid you mean this?\n\ttasks\n", stderr)
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"a\n\n\nb\n", "a\n\nb"},
		{"x\x1b[31m red\r", `x\x1b[31m red\r`},
		{"keep\ttab  \n", "keep\ttab"},
		{"title \x1b]0;x\x07\n\tC1 \u009b", "title \\x1b]0;x\\x07\n\tC1 \\u009b"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, errorText(tt.in), "%q", tt.in)
	}
}

func TestAPIFailures(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	srv := redistest.Shared(t)

	code, _, stderr := runCmd(t, map[string]string{"DTQ_REDIS_URL": "redis://127.0.0.1:1/0"}, "api")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "dtq: cannot reach Redis at redis://127.0.0.1:1/0")

	code, _, stderr = runCmd(t, map[string]string{"DTQ_REDIS_URL": srv.URL(), "DTQ_KEY_PREFIX": "apifail"},
		"api", "--api-addr", busy.Addr().String())
	require.Equal(t, 1, code)
	require.Contains(t, stderr, fmt.Sprintf("dtq: cannot listen on %s (DTQ_API_ADDR)", busy.Addr()))
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runCmd(t, nil, "version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^dtq \S+ \(revision \S+, go\S+, \S+/\S+\)\n$`, stdout)

	code, stdout, _ = runCmd(t, nil, "--version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^dtq \S+\n$`, stdout)

	code, stdout, _ = runCmd(t, nil, "--help")
	require.Equal(t, 0, code)
	for _, sub := range []string{"api", "dev", "version", "completion"} {
		require.Contains(t, stdout, "\n  "+sub+" ")
	}

	code, stdout, _ = runCmd(t, nil, "api", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "--max-queue-depth")
	require.Contains(t, stdout, "DTQ_MAX_QUEUE_DEPTH")
	require.Contains(t, stdout, "-q, --queues")

	code, stdout, _ = runCmd(t, nil, "dev", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "--redis string")
	require.Contains(t, stdout, "--data-dir string")
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, stdout, stderr := runCmd(t, nil, "completion", shell)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "dtq", shell)
	}
}

func TestDevTaskTypes(t *testing.T) {
	t.Parallel()
	require.Nil(t, devTaskTypes(nil), "dev accepts any type by default")
	require.Equal(t, append(append([]string{}, exampleTaskTypes...), "resize"), devTaskTypes([]string{"echo", "resize"}))
}

func TestBaseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "http://127.0.0.1:8080/"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 80}, "http://127.0.0.1:80/"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 80}, "http://127.0.0.1:80/"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9}, "http://[::1]:9/"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, baseURL(tt.addr))
	}
}
