package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestGetTask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.post(t, `{"task_type":"echo","queue":"q","payload":{"a":1}}`).task(t).TaskID

	res := b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "")
	require.Equal(t, http.StatusOK, res.status)
	tk := res.task(t)
	require.Equal(t, id, tk.TaskID)
	require.Equal(t, "queued", tk.Status)
	require.Nil(t, tk.Duplicate) // only submissions answer "duplicate"

	for _, missing := range []string{"0190a5c4e2c07000800000000000ffff", "not-an-id", "ZZ"} {
		b.do(t, http.MethodGet, "/api/v1/tasks/"+missing, "").requireError(t, http.StatusNotFound, codeTaskNotFound, "")
	}
	b.do(t, http.MethodGet, "/api/v1/tasks/"+id+"?verbose=1", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "verbose")
}

func TestGetTaskWait(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.post(t, `{"task_type":"echo"}`).task(t).TaskID

	type answer struct {
		status int
		task   taskJSON
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := b.srv.Client().Get(b.srv.URL + "/api/v1/tasks/" + id + "?wait=30s")
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer res.Body.Close()
		var a answer
		a.status, a.err = res.StatusCode, json.NewDecoder(res.Body).Decode(&a.task)
		done <- a
	}()
	// The task finishes (as a worker would record it); the long poll sees it.
	require.NoError(t, b.rc.HSet(b.ctx, b.keys.Task("default", id), "status", "succeeded").Err())
	select {
	case a := <-done:
		require.NoError(t, a.err)
		require.Equal(t, http.StatusOK, a.status)
		require.Equal(t, "succeeded", a.task.Status)
	case <-time.After(30 * time.Second):
		t.Fatal("long poll did not return after the task finished")
	}

	// A short wait on a task that stays live answers with it as it is.
	other := b.post(t, `{"task_type":"echo"}`).task(t).TaskID
	res := b.do(t, http.MethodGet, "/api/v1/tasks/"+other+"?wait=0.05", "")
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "queued", res.task(t).Status)

	b.do(t, http.MethodGet, "/api/v1/tasks/0190a5c4e2c07000800000000000ffff?wait=1s", "").
		requireError(t, http.StatusNotFound, codeTaskNotFound, "")
}

func TestParseWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true},
		{"0", 0, true},
		{"30s", 30 * time.Second, true},
		{"1m", time.Minute, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"60", time.Minute, true},
		{"250ms", 250 * time.Millisecond, true},
		{"61s", 0, false},
		{"61", 0, false},
		{"-1", 0, false},
		{"-1s", 0, false},
		{"abc", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1e400", 0, false},
	} {
		got, err := parseWait(tc.in)
		if !tc.ok {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestGetTaskBadWait(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, w := range []string{"61s", "-1", "soon", "1&wait=2"} {
		res := b.do(t, http.MethodGet, "/api/v1/tasks/0190a5c4e2c07000800000000000ffff?wait="+w, "")
		res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "wait")
	}
}

type listJSON struct {
	Items      []taskJSON `json:"items"`
	NextCursor *string    `json:"next_cursor"`
}

func (b *bundle) list(t *testing.T, query string) listJSON {
	t.Helper()
	res := b.do(t, http.MethodGet, "/api/v1/tasks?"+query, "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(res.body, &raw))
	require.ElementsMatch(t, []string{"items", "next_cursor"}, keysOf(raw))
	var l listJSON
	require.NoError(t, json.Unmarshal(res.body, &l))
	return l
}

func TestListTasksPages(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var ids []string
	for range 5 {
		ids = append(ids, b.post(t, `{"task_type":"echo","queue":"a"}`).task(t).TaskID)
	}
	b.post(t, `{"task_type":"other","queue":"b"}`)

	var got []string
	cursor := ""
	for page := 0; ; page++ {
		require.Less(t, page, 5)
		q := url.Values{"queue": {"a"}, "limit": {"2"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		l := b.list(t, q.Encode())
		for _, it := range l.Items {
			got = append(got, it.TaskID)
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]} // newest first
	require.Equal(t, want, got)

	all := b.list(t, "")
	require.Len(t, all.Items, 6)
	require.Nil(t, all.NextCursor)

	typed := b.list(t, "type=other&status=queued")
	require.Len(t, typed.Items, 1)
	require.Equal(t, "b", typed.Items[0].Queue)

	empty := b.list(t, "status=succeeded")
	require.NotNil(t, empty.Items)
	require.Empty(t, empty.Items)
}

func TestListTasksBadQuery(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, tc := range []struct{ query, field string }{
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"queue=Bad%20Queue", "queue"},
		{"status=done", "status"},
		{"cursor=zzz", "cursor"},
		{"queue=a&queue=b", "queue"},
		{"qeueu=a", "qeueu"},
		{"limit=%zz", ""},
	} {
		res := b.do(t, http.MethodGet, "/api/v1/tasks?"+tc.query, "")
		res.requireError(t, http.StatusBadRequest, codeInvalidRequest, tc.field)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: []APIKey{AdminKey("s3cret")}})
	res := b.do(t, http.MethodGet, "/health", "")
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `{"status":"ok"}`, string(res.body))
}

func TestReady(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: []APIKey{AdminKey("s3cret")}})
	res := b.do(t, http.MethodGet, "/ready", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	// The test server sets no maxmemory: ready, with a warning.
	var body struct {
		Status   string   `json:"status"`
		Warnings []string `json:"warnings"`
	}
	require.NoError(t, json.Unmarshal(res.body, &body))
	require.Equal(t, "ready", body.Status)
	require.Len(t, body.Warnings, 1)
	require.Contains(t, body.Warnings[0], "no maxmemory set")
}

// downServer is an API whose Redis address refuses connections.
func downServer(t *testing.T) *bundle {
	t.Helper()
	// A pool larger than the failed dials of a test: past PoolSize failures
	// go-redis starts a background redial that outlives the test. One dial
	// per command: the address refuses at once.
	rc := redis.NewClient(&redis.Options{Addr: redistest.DownAddr(t), DialTimeout: 500 * time.Millisecond, MaxRetries: -1, PoolSize: 1000,
		DialerRetries: 1})
	t.Cleanup(func() { rc.Close() })
	d := openDeployment(t, rc, "")
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	in := d.Inspector()
	adm, err := d.NewAdmin(nil)
	require.NoError(t, err)
	api, err := New(Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: newWorkerGateway(t, rc, "")})
	require.NoError(t, err)
	return &bundle{ctx: context.Background(), api: api, srv: newTestServer(t, api)}
}

func TestRedisDown(t *testing.T) {
	t.Parallel()
	b := downServer(t)

	e := b.do(t, http.MethodGet, "/ready", "").requireError(t, http.StatusServiceUnavailable, codeRedisUnavailable, "")
	require.Contains(t, e.Message, "not ready")

	b.post(t, `{"task_type":"echo"}`).requireError(t, http.StatusServiceUnavailable, codeRedisUnavailable, "")
	b.do(t, http.MethodGet, "/api/v1/tasks/0190a5c4e2c07000800000000000ffff", "").
		requireError(t, http.StatusServiceUnavailable, codeRedisUnavailable, "")
	b.do(t, http.MethodGet, "/api/v1/tasks", "").requireError(t, http.StatusServiceUnavailable, codeRedisUnavailable, "")

	res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", `{"tasks":[{"task_type":"echo"},{"priority":1}]}`)
	require.Equal(t, http.StatusOK, res.status)
	var out batchJSON
	require.NoError(t, json.Unmarshal(res.body, &out))
	require.Equal(t, 503, out.Items[0].HTTPStatus)
	require.Equal(t, codeRedisUnavailable, out.Items[0].Error.Code)
	require.Equal(t, 400, out.Items[1].HTTPStatus)

	// Health does not touch Redis.
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/health", "").status)
}

// With replica acknowledgements on, /ready warns, without failing, about
// what keeps them from protecting a write: no append-only file, fewer
// connected replicas than the acknowledgements need.
func TestReadyWarnsAboutReplicaAcks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		acks    int
		aof     bool
		want    []string // one warning each, besides the maxmemory one
		wantNot []string
	}{
		{"acks off", 0, false, nil, []string{"DTQ_REPLICA_ACKS"}},
		{"no aof, no replica", 1, false, []string{"without the append-only file", "has 0 connected replica"}, nil},
		{"aof, no replica", 1, true, []string{"has 0 connected replica"}, []string{"append-only"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"--appendonly", "no"}
			if tc.aof {
				args = []string{"--appendonly", "yes"}
			}
			srv, err := redistest.Start(args...)
			require.NoError(t, err)
			t.Cleanup(srv.Stop)
			b := setup(t, options{redis: &redistest.Setup{Server: srv, Client: srv.Client(t), Prefix: "r"},
				deployment: func(cfg *dtq.DeploymentConfig) { cfg.ReplicaAcks = tc.acks }})
			res := b.do(t, http.MethodGet, "/ready", "")
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			var body struct {
				Status   string   `json:"status"`
				Warnings []string `json:"warnings"`
			}
			require.NoError(t, json.Unmarshal(res.body, &body))
			require.Equal(t, "ready", body.Status)
			require.Len(t, body.Warnings, 1+len(tc.want), "%q", body.Warnings)
			all := strings.Join(body.Warnings, "\n")
			for _, w := range tc.want {
				require.Contains(t, all, w)
			}
			for _, w := range tc.wantNot {
				require.NotContains(t, all, w)
			}
		})
	}
}
