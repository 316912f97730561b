package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/events"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/examples"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The API keys of a test server, one per role. The admin key's name is what
// the audit log shows as the actor.
const (
	adminToken    = "admin-secret"
	producerToken = "producer-secret"
	readerToken   = "reader-secret"
)

// apiBundle is what an operator-command test needs: a live API on its own
// key prefix (real Redis, real library objects) and the environment that
// points the CLI at it with the admin key.
type apiBundle struct {
	ctx    context.Context
	rc     *redis.Client
	prefix string
	d      *dtq.Deployment
	client *dtq.Client
	insp   *dtq.Inspector
	admin  *dtq.Admin
	srv    *httptest.Server
	hub    *events.Hub
	vars   map[string]string
}

// setupAPI starts the API, with its event feed on a real event hub, until
// the test ends.
func setupAPI(t *testing.T) *apiBundle {
	t.Helper()
	s := redistest.New(t)
	d := openDeployment(t, s.Client, s.Prefix)
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	in := d.Inspector()
	adm, err := d.NewAdmin(&dtq.AdminConfig{Client: c})
	require.NoError(t, err)
	hub, err := events.NewHub(s.Client, s.Prefix, &events.Config{PollInterval: 20 * time.Millisecond, Block: 200 * time.Millisecond})
	require.NoError(t, err)
	gateway, err := d.NewWorkerGateway(&dtq.WorkerGatewayConfig{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	api, err := httpapi.New(httpapi.Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: gateway, Events: hub, Logger: slog.New(slog.DiscardHandler),
		Keys: []httpapi.APIKey{
			{Role: httpapi.RoleAdmin, Name: "ops", Secret: adminToken},
			{Role: httpapi.RoleProducer, Name: "shop", Secret: producerToken},
			{Role: httpapi.RoleReader, Name: "dash", Secret: readerToken},
		}})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close) // after the hub stopped, which ends the streams

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return &apiBundle{ctx: context.Background(), rc: s.Client, prefix: s.Prefix, d: d, client: c, insp: in, admin: adm,
		srv: srv, hub: hub, vars: map[string]string{"DTQ_API_URL": srv.URL, "DTQ_TOKEN": adminToken}}
}

// run runs a dtq command against the bundle's API with the admin key.
func (b *apiBundle) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCmd(t, b.vars, args...)
}

// runWith runs a dtq command with extra or changed environment variables
// ("" removes one).
func (b *apiBundle) runWith(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	env := map[string]string{}
	for k, v := range b.vars {
		env[k] = v
	}
	for k, v := range vars {
		if v == "" {
			delete(env, k)
		} else {
			env[k] = v
		}
	}
	return runCmd(t, env, args...)
}

// ok runs a command that must succeed and returns its stdout.
func (b *apiBundle) ok(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := b.run(t, args...)
	require.Equal(t, 0, code, "dtq %v: %s", args, stderr)
	return stdout
}

// submit creates a task through the library and returns its id.
func (b *apiBundle) submit(t *testing.T, sub dtq.Submission) string {
	t.Helper()
	res, err := b.client.Submit(b.ctx, sub)
	require.NoError(t, err)
	return res.TaskID
}

// startWorker runs a real worker with the example handlers on queues until
// the test ends and waits for its first heartbeat.
func (b *apiBundle) startWorker(t *testing.T, id string, queues ...string) *dtq.Worker {
	t.Helper()
	qs := map[string]int{}
	for _, q := range queues {
		qs[q] = 1
	}
	d := openDeployment(t, b.rc, b.prefix)
	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: qs, Concurrency: 4, WorkerID: id,
		VisibilityTimeout: 3 * time.Second, HeartbeatInterval: time.Second, RetryJitter: -1,
		RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond,
		DrainTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	examples.Register(w.ServeMux, d, b.rc)
	workertest.Run(t, w)
	require.Eventually(t, func() bool {
		_, err := b.insp.GetWorker(b.ctx, id)
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "the worker never heartbeated")
	return w
}

// waitStatus polls until the task reaches want.
func (b *apiBundle) waitStatus(t *testing.T, id string, want dtqtype.Status) {
	t.Helper()
	require.Eventually(t, func() bool {
		ti, err := b.insp.GetTask(b.ctx, id)
		require.NoError(t, err)
		return ti.Status == want
	}, 20*time.Second, 5*time.Millisecond, "task %s never reached %s", id, want)
}

var (
	hexID      = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	wireTimeRe = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\b`)
)

// normalize replaces what changes from run to run: ids (task and request
// ids, numbered in order of appearance) and times, each by a placeholder of
// the same width, so that table columns stay aligned.
func normalize(s string) string {
	ids := map[string]string{}
	s = hexID.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := ids[id]; !ok {
			ids[id] = placeholder(fmt.Sprintf("id-%d", len(ids)+1), len(id))
		}
		return ids[id]
	})
	return wireTimeRe.ReplaceAllStringFunc(s, func(ts string) string { return placeholder("time", len(ts)) })
}

// placeholder is <name....> padded to width.
func placeholder(name string, width int) string {
	return "<" + name + strings.Repeat(".", max(0, width-len(name)-2)) + ">"
}

// golden compares normalized output with testdata/<name>.golden, or
// rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got = normalize(got)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run %s -update to create it", t.Name())
	require.Equal(t, string(want), got, "output differs from %s (go test -update rewrites it)", path)
}

// lines splits output into its lines.
func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// requireAPIError checks a command's failure on an API error: exit 1 and
// exactly one stderr line "dtq: CODE: message (request <id>)".
func requireAPIError(t *testing.T, code int, stdout, stderr, wantCode string) {
	t.Helper()
	require.Equal(t, 1, code, "stderr: %s", stderr)
	require.Empty(t, stdout)
	require.Regexp(t, `^dtq: `+wantCode+`: [^\n]+ \(request [0-9a-f]{32}\)\n$`, stderr)
}
