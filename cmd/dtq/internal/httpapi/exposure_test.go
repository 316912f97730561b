package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/access"
	"github.com/dtq-io/dtq/internal/redistest"
)

// doHost sends a request with the given Host header and browser headers
// as a page on that host would send them.
func (b *bundle) doHost(t *testing.T, method, path, host, body string) *response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.srv.URL+path, rd)
	require.NoError(t, err)
	req.Host = host
	req.Header.Set("Origin", "http://"+host)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return &response{status: res.StatusCode, header: res.Header, body: data}
}

// TestHostCheckStopsRebinding replays what a page on a rebound name sends
// to an open-mode API: its own Host, a matching Origin, same-origin.
func TestHostCheckStopsRebinding(t *testing.T) {
	t.Parallel()
	b := setup(t, options{allowedHosts: []string{"dtq.internal"}})
	port := b.srv.Listener.Addr().String()[strings.LastIndexByte(b.srv.Listener.Addr().String(), ':'):]

	for _, host := range []string{"evil.example" + port, "evil.example", "EVIL.example.", "10.0.0.7" + port, "localhost.evil.example" + port} {
		b.doHost(t, http.MethodPost, "/api/v1/tasks", host, `{"task_type":"echo"}`).
			requireError(t, http.StatusMisdirectedRequest, codeForbidden, "")
		b.doHost(t, http.MethodGet, "/api/v1/tasks", host, "").
			requireError(t, http.StatusMisdirectedRequest, codeForbidden, "")
		b.doHost(t, http.MethodGet, "/metrics", host, "").
			requireError(t, http.StatusMisdirectedRequest, codeForbidden, "")
		// Probes answer whatever the Host.
		require.Equal(t, http.StatusOK, b.doHost(t, http.MethodGet, "/health", host, "").status)
	}
	require.Equal(t, 0, b.keyCount(t), "a refused request writes nothing")

	for _, host := range []string{"localhost" + port, "LOCALHOST", "127.0.0.1" + port, "127.1.2.3", "[::1]" + port, "dtq.internal" + port, "DTQ.Internal."} {
		res := b.doHost(t, http.MethodGet, "/api/v1/tasks", host, "")
		require.Equal(t, http.StatusOK, res.status, "host %s: %s", host, res.body)
	}
}

func TestHostCheckOnlyInOpenMode(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	res := b.doHost(t, http.MethodGet, "/api/v1/tasks", "api.example.com", "")
	require.Equal(t, http.StatusUnauthorized, res.status, "with keys the key decides, not the Host")
}

func TestHostCheckWildcard(t *testing.T) {
	t.Parallel()
	b := setup(t, options{allowedHosts: []string{"*"}})
	require.Equal(t, http.StatusOK, b.doHost(t, http.MethodGet, "/api/v1/tasks", "anything.example", "").status)
}

func TestValidateAllowedHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"*", true}, {"dtq.internal", true}, {"10.0.0.7", true}, {"::1", true}, {"[::1]", true},
		{"", false}, {"host:8080", false}, {"http://host", false}, {"a b", false}, {strings.Repeat("a", 254), false},
	} {
		err := access.ValidateAllowedHost(tc.in)
		require.Equal(t, tc.ok, err == nil, "%q: %v", tc.in, err)
	}
	_, err := New(Config{Client: &dtq.Client{}, Inspector: &dtq.Inspector{}, Admin: &dtq.Admin{}, WorkerGateway: &dtq.WorkerGateway{}, AllowedHosts: []string{"x:1"}})
	require.ErrorContains(t, err, "AllowedHosts")
}

// TestReadyNamesTheCheckOnly: /ready is open, so its body names the failed
// check and nothing else: no address, no driver error.
func TestReadyNamesTheCheckOnly(t *testing.T) {
	t.Parallel()
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		b := downServer(t)
		res := b.do(t, http.MethodGet, "/ready", "")
		e := res.requireError(t, http.StatusServiceUnavailable, codeRedisUnavailable, "")
		require.Equal(t, dtq.CheckRedisReachable, e.Details["check"])
		require.NotContains(t, string(res.body), "127.0.0.1")
		require.NotContains(t, string(res.body), "dial")
		require.NotContains(t, string(res.body), "refused")
	})
	t.Run("eviction policy", func(t *testing.T) {
		t.Parallel()
		srv, err := redistest.Start("--maxmemory-policy", "allkeys-lru")
		require.NoError(t, err)
		t.Cleanup(srv.Stop)
		rc := srv.Client(t)
		d := openDeployment(t, rc, "")
		c, err := d.NewClient(nil)
		require.NoError(t, err)
		in := d.Inspector()
		adm, err := d.NewAdmin(nil)
		require.NoError(t, err)
		api, err := New(Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: newWorkerGateway(t, rc, "")})
		require.NoError(t, err)
		b := &bundle{ctx: context.Background(), api: api, srv: newTestServer(t, api)}
		res := b.do(t, http.MethodGet, "/ready", "")
		e := res.requireError(t, http.StatusServiceUnavailable, codeRedisUnavailable, "")
		require.Equal(t, dtq.CheckMaxmemoryPolicy, e.Details["check"])
		require.NotContains(t, string(res.body), "allkeys-lru")
		require.Contains(t, e.Message, "noeviction")
	})
}

// countingFeed is an event feed that only reports subscriber counts.
type countingFeed struct{ open int }

func (f countingFeed) ServeSSE(w http.ResponseWriter, r *http.Request) {}
func (f countingFeed) ServeWS(w http.ResponseWriter, r *http.Request)  {}
func (f countingFeed) SubscriberCounts() (int, int64)                  { return f.open, 7 }

func TestSubscriberMetrics(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	d := openDeployment(t, s.Client, s.Prefix)
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	in := d.Inspector()
	adm, err := d.NewAdmin(nil)
	require.NoError(t, err)
	api, err := New(Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: newWorkerGateway(t, s.Client, s.Prefix), Events: countingFeed{open: 3}})
	require.NoError(t, err)
	b := &bundle{ctx: context.Background(), api: api, srv: newTestServer(t, api)}
	res := b.do(t, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, res.status)
	require.Contains(t, string(res.body), "\ndtq_api_event_subscribers 3\n")
	require.Contains(t, string(res.body), "\ndtq_api_event_subscribers_refused_total 7\n")
}

// TestReadyNamesWhatItCannotCheck: on a server that refuses INFO and
// CONFIG, as managed services may, /ready is 200 and names the checks it
// could not make.
func TestReadyNamesWhatItCannotCheck(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	require.NoError(t, srv.Client(t).Do(ctx, "ACL", "SETUSER", "dtq", "on", ">pw", "~*", "&*", "+@all", "-info", "-config").Err())
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "dtq", Password: "pw"})
	t.Cleanup(func() { _ = rc.Close() })
	d := openDeployment(t, rc, "")
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	adm, err := d.NewAdmin(nil)
	require.NoError(t, err)
	api, err := New(Config{Client: c, Inspector: d.Inspector(), Admin: adm, WorkerGateway: newWorkerGateway(t, rc, "")})
	require.NoError(t, err)
	b := &bundle{ctx: ctx, api: api, srv: newTestServer(t, api)}
	res := b.do(t, http.MethodGet, "/ready", "")
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	var body struct {
		Status  string   `json:"status"`
		Unknown []string `json:"unknown"`
	}
	require.NoError(t, json.Unmarshal(res.body, &body))
	require.Equal(t, "ready", body.Status)
	require.Equal(t, []string{dtq.CheckRedisVersion, dtq.CheckMaxmemoryPolicy}, body.Unknown)
}
