package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var testKeys = []APIKey{
	{Role: RoleReader, Name: "viewer", Secret: "reader-secret"},
	{Role: RoleProducer, Name: "ingest", Secret: "producer-secret"},
	{Role: RoleAdmin, Name: "ops", Secret: "admin-secret"},
}

type sample struct {
	method, path, body string
	ok                 int // the status when allowed
}

// samples holds one valid request per route, keyed like the route table.
func samples(id string) map[string]sample {
	return map[string]sample{
		"GET /health":              {http.MethodGet, "/health", "", 200},
		"GET /ready":               {http.MethodGet, "/ready", "", 200},
		"GET /api/v1/openapi.json": {http.MethodGet, "/api/v1/openapi.json", "", 200},
		"POST /api/v1/tasks":       {http.MethodPost, "/api/v1/tasks", `{"task_type":"echo"}`, 202},
		"POST /api/v1/tasks/batch": {http.MethodPost, "/api/v1/tasks/batch", `{"tasks":[{"task_type":"echo"}]}`, 200},
		"GET /api/v1/tasks":        {http.MethodGet, "/api/v1/tasks", "", 200},
		"GET /api/v1/tasks/{id}":   {http.MethodGet, "/api/v1/tasks/" + id, "", 200},
	}
}

func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	created := b.post(t, `{"task_type":"echo"}`, "Authorization", "Bearer admin-secret")
	require.Equal(t, http.StatusAccepted, created.status)
	reqs := samples(created.task(t).TaskID)

	type cred struct {
		name   string
		secret string
		role   Role // 0 = no valid key
	}
	creds := []cred{{"missing", "", 0}, {"wrong", "not-a-key", 0}}
	for _, k := range testKeys {
		creds = append(creds, cred{k.Role.String(), k.Secret, k.Role})
	}
	send := map[string]func(string) []string{
		"bearer":    func(s string) []string { return []string{"Authorization", "Bearer " + s} },
		"x-api-key": func(s string) []string { return []string{"X-API-Key", s} },
	}

	for _, rt := range b.api.routes {
		sm, ok := reqs[rt.method+" "+rt.pattern]
		require.True(t, ok, "no auth sample for route %s %s: add one", rt.method, rt.pattern)
		for _, c := range creds {
			for how, hdr := range send {
				var h []string
				if c.secret != "" {
					h = hdr(c.secret)
				}
				res := b.do(t, sm.method, sm.path, sm.body, h...)
				where := rt.method + " " + rt.pattern + " with " + c.name + " via " + how
				switch {
				case rt.role == 0 || c.role >= rt.role:
					require.Equal(t, sm.ok, res.status, "%s: %s", where, res.body)
				case c.role == 0:
					res.requireError(t, http.StatusUnauthorized, codeUnauthorized, "")
					require.Contains(t, res.header.Get("WWW-Authenticate"), "Bearer", where)
				default:
					e := res.requireError(t, http.StatusForbidden, codeForbidden, "")
					require.Equal(t, rt.role.String(), e.Details["required_role"], where)
				}
			}
		}
	}
}

func TestAuthRoles(t *testing.T) {
	t.Parallel()
	s := &Server{}
	want := map[string]Role{
		"GET /health": 0, "GET /ready": 0, "GET /api/v1/openapi.json": 0,
		"POST /api/v1/tasks": RoleProducer, "POST /api/v1/tasks/batch": RoleProducer,
		"GET /api/v1/tasks": RoleReader, "GET /api/v1/tasks/{id}": RoleReader,
	}
	got := map[string]Role{}
	for _, rt := range s.routeTable() {
		got[rt.method+" "+rt.pattern] = rt.role
	}
	require.Equal(t, want, got)
}

func TestAuthCredentialForms(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	for _, tc := range []struct {
		name string
		hdr  []string
		ok   bool
	}{
		{"lowercase scheme", []string{"Authorization", "bearer reader-secret"}, true},
		{"both headers agree", []string{"Authorization", "Bearer reader-secret", "X-API-Key", "reader-secret"}, true},
		{"both headers disagree", []string{"Authorization", "Bearer reader-secret", "X-API-Key", "admin-secret"}, false},
		{"basic scheme", []string{"Authorization", "Basic cmVhZGVyLXNlY3JldA=="}, false},
		{"bearer without token", []string{"Authorization", "Bearer"}, false},
		{"bearer blank token", []string{"Authorization", "Bearer   "}, false},
		{"prefix of a secret", []string{"X-API-Key", "reader-secre"}, false},
		{"secret with suffix", []string{"X-API-Key", "reader-secret2"}, false},
	} {
		res := b.do(t, http.MethodGet, "/api/v1/tasks", "", tc.hdr...)
		if tc.ok {
			require.Equal(t, http.StatusOK, res.status, tc.name)
			continue
		}
		res.requireError(t, http.StatusUnauthorized, codeUnauthorized, "")
	}

	// Repeated credential headers are refused.
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/api/v1/tasks", nil)
	require.NoError(t, err)
	req.Header.Add("X-API-Key", "reader-secret")
	req.Header.Add("X-API-Key", "admin-secret")
	res, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
}

func TestAuthOpenMode(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	require.True(t, b.api.OpenMode())
	id := b.post(t, `{"task_type":"echo"}`).task(t).TaskID
	reqs := samples(id)
	for _, rt := range b.api.routes {
		sm := reqs[rt.method+" "+rt.pattern]
		for _, h := range [][]string{nil, {"Authorization", "Bearer whatever"}, {"Authorization", "Basic x"}} {
			res := b.do(t, sm.method, sm.path, sm.body, h...)
			require.Equal(t, sm.ok, res.status, "%s %s: %s", rt.method, rt.pattern, res.body)
		}
	}
}

func TestKeyFromContext(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	require.False(t, b.api.OpenMode())
	var got APIKey
	var found bool
	h := b.api.authorize(RoleReader, func(w http.ResponseWriter, r *http.Request) {
		got, found = KeyFromContext(r.Context())
	})
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set("X-API-Key", "producer-secret")
	h(httptest.NewRecorder(), req)
	require.True(t, found)
	require.Equal(t, APIKey{Role: RoleProducer, Name: "ingest"}, got) // no secret

	// The request log names the key, never its secret.
	res := b.do(t, http.MethodGet, "/api/v1/tasks", "", "Authorization", "Bearer producer-secret")
	require.Equal(t, http.StatusOK, res.status)
	require.Contains(t, b.logs.String(), `"key":"ingest"`)
	require.NotContains(t, b.logs.String(), "producer-secret")

	open := setup(t, options{})
	h = open.api.authorize(RoleReader, func(w http.ResponseWriter, r *http.Request) {
		_, found = KeyFromContext(r.Context())
	})
	h(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
	require.False(t, found)
}

func TestParseAPIKeys(t *testing.T) {
	t.Parallel()
	keys, err := ParseAPIKeys("")
	require.NoError(t, err)
	require.Empty(t, keys)

	keys, err = ParseAPIKeys("reader:alice:s1, producer:bob:s:with:colons ,admin:root:s3")
	require.NoError(t, err)
	require.Equal(t, []APIKey{
		{Role: RoleReader, Name: "alice", Secret: "s1"},
		{Role: RoleProducer, Name: "bob", Secret: "s:with:colons"},
		{Role: RoleAdmin, Name: "root", Secret: "s3"},
	}, keys)

	// Rotation: one name, two secrets.
	keys, err = ParseAPIKeys("admin:ops:old-TOPSECRET,admin:ops:new-TOPSECRET")
	require.NoError(t, err)
	require.Len(t, keys, 2)

	for _, tc := range []struct {
		in, want string
	}{
		{"TOPSECRET", "not of the form role:name:secret"},
		{"reader:TOPSECRET", "not of the form role:name:secret"},
		{"TOPSECRET:alice:bob", "entry 1 has an unknown role"},
		{"Admin:alice:TOPSECRET", "entry 1 has an unknown role"},
		{"writer:alice:TOPSECRET", "unknown role"},
		{"reader::TOPSECRET", "entry 1 has an empty name"},
		{"reader:alice:", "entry 1 has an empty secret"},
		{"reader:a b:TOPSECRET", "entry 1: the name must be"},
		{"reader:alice:TOP SECRET", "entry 1: the secret must be"},
		{"reader:a:TOPSECRET,admin:b:TOPSECRET", "entries 1 and 2 have the same secret"},
		{"reader:a:TOPSECRET,,admin:b:other", "entry 2 is empty"},
		{"reader:a:TOPSECRET,", "entry 2 is empty"},
	} {
		_, err := ParseAPIKeys(tc.in)
		require.Error(t, err, tc.in)
		require.Contains(t, err.Error(), tc.want, tc.in)
		require.NotContains(t, err.Error(), "TOPSECRET", "the error must not echo the secret")
		require.NotContains(t, err.Error(), "TOP SECRET")
		if !strings.Contains(tc.want, "same secret") && !strings.Contains(tc.want, "must be") {
			require.Contains(t, err.Error(), "role:name:secret", tc.in)
		}
	}
}

func TestAdminKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, APIKey{Role: RoleAdmin, Name: "admin", Secret: "x"}, AdminKey("x"))
	require.Equal(t, "reader", RoleReader.String())
	require.Equal(t, "producer", RoleProducer.String())
	require.Equal(t, "admin", RoleAdmin.String())
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	_, err := New(Config{})
	require.Error(t, err)

	c, in := b.api.cfg.Client, b.api.cfg.Inspector
	for _, cfg := range []Config{
		{Client: c},
		{Inspector: in},
		{Client: c, Inspector: in, MaxPayloadBytes: -1},
		{Client: c, Inspector: in, Keys: []APIKey{{Role: RoleAdmin, Name: "a", Secret: "dup-TOPSECRET"}, {Role: RoleReader, Name: "b", Secret: "dup-TOPSECRET"}}},
		{Client: c, Inspector: in, Keys: []APIKey{{Role: 7, Name: "a", Secret: "s"}}},
		{Client: c, Inspector: in, Keys: []APIKey{AdminKey("")}},
	} {
		_, err := New(cfg)
		require.Error(t, err)
		require.NotContains(t, err.Error(), "TOPSECRET")
	}
	_, err = New(Config{Client: c, Inspector: in, Keys: []APIKey{AdminKey("k")}})
	require.NoError(t, err)
}
