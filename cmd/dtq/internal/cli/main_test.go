package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

func TestMain(m *testing.M) {
	// The docs tests run this binary as the dtq command (a symlink named
	// dtq on PATH, see dtqPath), as a shell would run the real one.
	if filepath.Base(os.Args[0]) == "dtq" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	// The api tests run `dtq api` on the shared server under fixed
	// DTQ_KEY_PREFIXes rather than a prefix from redistest.New.
	redistest.Reserve("apiserves", "apikeys", "apiopen", "apifail", "apiworkflows")
	os.Exit(redistest.Main(m))
}

// syncBuffer is an output a running command writes from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func mapEnv(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// runCmd runs a command that is expected to return on its own.
func runCmd(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = execute(ctx, args, &env{stdout: &out, stderr: &errOut, lookupEnv: mapEnv(vars)})
	return code, out.String(), errOut.String()
}

// running is a long-running command (api, dev) started in-process.
type running struct {
	base           string // http://host:port
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan int
	code           int
	stopped        bool
}

// startCmd runs args until the API listens; the command is stopped when the
// test ends unless the test stops it first.
func startCmd(t *testing.T, vars map[string]string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	addrs := make(chan string, 1)
	e := &env{stdout: r.stdout, stderr: r.stderr, lookupEnv: mapEnv(vars), onListen: func(a string) { addrs <- a }}
	go func() { r.done <- execute(ctx, args, e) }()
	t.Cleanup(func() { r.stop(t) })
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	select {
	case a := <-addrs:
		r.base = "http://" + a
	case code := <-r.done:
		r.code, r.stopped = code, true
		t.Fatalf("dtq %v exited with %d before listening; stderr:\n%s", args, code, r.stderr)
	case <-timeout.C:
		t.Fatalf("dtq %v did not listen within 60s; stderr:\n%s", args, r.stderr)
	}
	return r
}

// stop cancels the command's context (as SIGINT would) and returns its
// exit code.
func (r *running) stop(t *testing.T) int {
	t.Helper()
	if r.stopped {
		return r.code
	}
	r.cancel()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case r.code = <-r.done:
	case <-timeout.C:
		t.Fatalf("the command did not stop within 30s; stderr:\n%s", r.stderr)
	}
	r.stopped = true
	return r.code
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// waitHealthy polls /health until it answers 200.
func (r *running) waitHealthy(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := httpClient.Get(r.base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond, "/health never answered 200")
}

// do sends a request and decodes the JSON answer.
func (r *running) do(t *testing.T, method, path string, headers map[string]string, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.base+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &m), "%s %s answered %s", method, path, raw)
	}
	return resp.StatusCode, resp.Header, m
}
