package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// The tests of the answer check itself (openapi_check_test.go): that it
// fails what it must, that the document uses only what it checks, and a
// walk of every documented operation with valid and invalid requests.

func TestOpenAPISchemaCheck(t *testing.T) {
	t.Parallel()
	c, err := newContract([]byte(`{"components": {"schemas": {
		"Name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4},
		"Closed": {"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"type": "integer"}}},
		"Listed": {"type": "object", "properties": {"a": {"type": "integer"}}},
		"Both": {"allOf": [{"$ref": "#/components/schemas/Listed"}, {"properties": {"b": {"type": "boolean"}}}]}
	}}}`))
	require.NoError(t, err)
	tests := []struct {
		name, schema, value string
		want                string // a problem's text; "" = none
	}{
		{"type", `{"type": "string"}`, `1`, "is not of type string"},
		{"type ok", `{"type": "string"}`, `"x"`, ""},
		{"type list", `{"type": ["string", "null"]}`, `null`, ""},
		{"type list fails", `{"type": ["string", "null"]}`, `true`, "not of type string or null"},
		{"integer", `{"type": "integer"}`, `1.5`, "not of type integer"},
		{"integer exponent", `{"type": "integer"}`, `1e3`, ""},
		{"number", `{"type": "number"}`, `1.5`, ""},
		{"enum", `{"enum": ["a", "b"]}`, `"c"`, "is not one of"},
		{"enum number", `{"enum": [1, 2]}`, `2.0`, ""},
		{"const", `{"const": true}`, `false`, "is not true"},
		{"minimum", `{"type": "integer", "minimum": 1}`, `0`, "less than the minimum"},
		{"maximum", `{"maximum": 9}`, `10`, "more than the maximum"},
		{"exclusiveMinimum", `{"exclusiveMinimum": 0}`, `0`, "is not more than"},
		{"pattern", `{"$ref": "#/components/schemas/Name"}`, `"ab1"`, "does not match"},
		{"minLength", `{"$ref": "#/components/schemas/Name"}`, `"a"`, "shorter than 2"},
		{"maxLength counts characters", `{"$ref": "#/components/schemas/Name"}`, `"abcde"`, "longer than 4"},
		{"date-time", `{"type": "string", "format": "date-time"}`, `"2026-01-02 15:04"`, "not an RFC 3339"},
		{"date-time ok", `{"type": "string", "format": "date-time"}`, `"2026-01-02T15:04:05.000Z"`, ""},
		{"unknown format", `{"format": "email"}`, `"a@b"`, "not implemented"},
		{"unknown keyword", `{"type": "string", "contentEncoding": "base64"}`, `"x"`, "does not implement"},
		{"required", `{"$ref": "#/components/schemas/Closed"}`, `{}`, `required member "a"`},
		{"additionalProperties false", `{"$ref": "#/components/schemas/Closed"}`, `{"a": 1, "z": 2}`, `"z" is not allowed`},
		{"additionalProperties schema", `{"additionalProperties": {"type": "integer"}}`, `{"x": "1"}`, "body.x"},
		{"property type", `{"$ref": "#/components/schemas/Closed"}`, `{"a": "1"}`, "body.a"},
		{"undocumented member", `{"$ref": "#/components/schemas/Listed"}`, `{"a": 1, "z": 2}`, `"z" is not in the document`},
		{"allOf members add up", `{"$ref": "#/components/schemas/Both"}`, `{"a": 1, "b": true}`, ""},
		{"allOf member missing from both", `{"$ref": "#/components/schemas/Both"}`, `{"a": 1, "c": 1}`, `"c" is not in the document`},
		{"free-form object", `{"type": "object"}`, `{"anything": [1]}`, ""},
		{"nested member", `{"properties": {"o": {"$ref": "#/components/schemas/Listed"}}}`, `{"o": {"y": 1}}`, `body.o: member "y"`},
		{"items", `{"type": "array", "items": {"type": "integer"}}`, `[1, "2"]`, "body[1]"},
		{"minItems", `{"type": "array", "minItems": 1}`, `[]`, "fewer than 1"},
		{"maxItems", `{"type": "array", "maxItems": 1}`, `[1, 2]`, "more than 1"},
		{"oneOf none", `{"oneOf": [{"type": "string"}, {"type": "null"}]}`, `1`, "matches none of oneOf"},
		{"oneOf two", `{"oneOf": [{"type": "integer"}, {"type": "number"}]}`, `1`, "matches 2 of oneOf"},
		{"oneOf one", `{"oneOf": [{"type": "integer"}, {"type": "string"}]}`, `1`, ""},
		{"anyOf", `{"anyOf": [{"type": "integer"}, {"type": "number"}]}`, `"x"`, "matches none of anyOf"},
		{"dangling ref", `{"$ref": "#/components/schemas/Nope"}`, `1`, "dangling $ref"},
		{"false schema", `{"properties": {"x": false}}`, `{"x": 1}`, "no value is allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var schema, v any
			require.NoError(t, decodeJSON([]byte(tt.schema), &schema))
			require.NoError(t, decodeJSON([]byte(tt.value), &v))
			problems := c.validate(schema, v, "body")
			if tt.want == "" {
				require.Empty(t, problems)
				return
			}
			require.NotEmpty(t, problems, "the check passed %s against %s", tt.value, tt.schema)
			require.Contains(t, strings.Join(problems, "\n"), tt.want)
		})
	}
}

// TestOpenAPICheckFailsBrokenAnswers holds one live answer to copies of
// the document with one thing broken, and broken copies of the answer to
// the document: each must be reported.
func TestOpenAPICheckFailsBrokenAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type":"echo","payload":{"n":1}}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	good := answer{method: http.MethodPost, path: "/api/v1/tasks", status: res.status, header: res.header, body: res.body, bodyKept: true}

	served, err := servedContract()
	require.NoError(t, err)
	pattern, problems := served.check(good)
	require.Equal(t, "POST /api/v1/tasks", pattern)
	require.Empty(t, problems)

	// A document with one thing changed.
	mutated := func(t *testing.T, change func(doc map[string]any)) *contract {
		t.Helper()
		c, err := newContract(openapiJSON)
		require.NoError(t, err)
		change(c.doc)
		return c
	}
	schema := func(doc map[string]any, name string) map[string]any {
		return doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
	}
	responses := func(doc map[string]any) map[string]any {
		return doc["paths"].(map[string]any)["/api/v1/tasks"].(map[string]any)["post"].(map[string]any)["responses"].(map[string]any)
	}
	docs := []struct {
		name   string
		change func(doc map[string]any)
		want   string
	}{
		{"status enum without queued", func(doc map[string]any) {
			st := schema(doc, "Status")
			st["enum"] = slices.DeleteFunc(slices.Clone(st["enum"].([]any)), func(v any) bool { return v == "queued" })
		}, `body.status: "queued" is not one of`},
		{"a member dropped", func(doc map[string]any) {
			delete(schema(doc, "Task")["properties"].(map[string]any), "priority")
		}, `member "priority" is not in the document`},
		{"a member required that is not sent", func(doc map[string]any) {
			task := schema(doc, "Task")
			task["required"] = append(slices.Clone(task["required"].([]any)), "worker_pool")
		}, `required member "worker_pool" is missing`},
		{"a type changed", func(doc map[string]any) {
			schema(doc, "Task")["properties"].(map[string]any)["priority"] = map[string]any{"type": "string"}
		}, "body.priority: 5 is not of type string"},
		{"the status undocumented", func(doc map[string]any) { delete(responses(doc), "202") }, "status 202 is not documented"},
		{"another media type", func(doc map[string]any) {
			r := responses(doc)["202"].(map[string]any)
			r["content"] = map[string]any{"application/problem+json": map[string]any{}}
		}, "Content-Type application/json is not documented"},
		{"a header required", func(doc map[string]any) {
			r := responses(doc)["202"].(map[string]any)
			r["headers"] = maps.Clone(r["headers"].(map[string]any))
			r["headers"].(map[string]any)["Dtq-Shard"] = map[string]any{"required": true, "schema": map[string]any{"type": "string"}}
		}, "no Dtq-Shard header"},
		{"a header's schema", func(doc map[string]any) {
			doc["components"].(map[string]any)["headers"].(map[string]any)["Location"] = map[string]any{"schema": map[string]any{"pattern": "^/api/v2/"}}
		}, "header Location: \"/api/v1/tasks/"},
	}
	for _, tt := range docs {
		t.Run("document/"+tt.name, func(t *testing.T) {
			t.Parallel()
			_, problems := mutated(t, tt.change).check(good)
			require.Contains(t, strings.Join(problems, "\n"), tt.want)
		})
	}

	answers := []struct {
		name   string
		change func(a *answer)
		want   string
	}{
		{"an undocumented status", func(a *answer) { a.status = http.StatusTeapot }, "status 418 is not documented"},
		{"no request id", func(a *answer) { a.header.Del("X-Request-ID") }, "no X-Request-ID"},
		{"plain text", func(a *answer) { a.header.Set("Content-Type", "text/plain; charset=utf-8") }, "Content-Type text/plain is not documented"},
		{"no Content-Type", func(a *answer) { a.header.Del("Content-Type") }, "is not a media type"},
		{"not JSON", func(a *answer) { a.body = []byte(`{"task_id":`) }, "body is not JSON"},
		{"two JSON values", func(a *answer) { a.body = append(slices.Clone(a.body), []byte(`{}`)...) }, "body is not JSON"},
		{"an error body on success", func(a *answer) {
			a.body = []byte(`{"code":"INVALID_TASK","message":"m","details":{},"request_id":"r"}`)
		}, `required member "task_id" is missing`},
		{"an undocumented member", func(a *answer) { a.body = setMember(t, a.body, "shard", 3) }, `member "shard" is not in the document`},
		{"a bad time", func(a *answer) { a.body = setMember(t, a.body, "created_at", 17) }, "body.created_at: 17 is not of type string or null"},
		{"a header this answer does not list", func(a *answer) { a.header.Set("Retry-After", "3") }, "sends the Retry-After header"},
		{"a body where none is documented", func(a *answer) { a.method, a.path, a.status = http.MethodDelete, "/api/v1/tasks/"+missingID, 204 },
			"has a body, but the document describes none"},
		{"an unknown route answering success", func(a *answer) { a.path = "/api/v2/tasks" }, "status 202 for a route the document does not describe"},
	}
	for _, tt := range answers {
		t.Run("answer/"+tt.name, func(t *testing.T) {
			t.Parallel()
			a := good
			a.header = good.header.Clone()
			tt.change(&a)
			_, problems := served.check(a)
			require.Contains(t, strings.Join(problems, "\n"), tt.want)
		})
	}

	// The wrapper every test server uses reports what it sees.
	t.Run("wrapper", func(t *testing.T) {
		t.Parallel()
		bad := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Request-ID", "r1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"status":"sick"}`)
		})
		ac := checkAnswers(t, bad)
		var mu sync.Mutex
		var reports []string
		ac.report = func(s string) { mu.Lock(); defer mu.Unlock(); reports = append(reports, s) }
		srv := httptest.NewServer(ac)
		t.Cleanup(srv.Close)
		res, err := srv.Client().Get(srv.URL + "/health")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		require.NoError(t, res.Body.Close())
		srv.Close() // every answer is checked once the server closed
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, reports, 1)
		require.Contains(t, reports[0], "GET /health answered 200")
		require.Contains(t, reports[0], `body.status: "sick" is not "ok"`)
		require.Equal(t, []int{200}, ac.statuses("GET /health"))
	})
}

// setMember returns the JSON object body with member k set to v.
func setMember(t *testing.T, body []byte, k string, v any) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	m[k] = v
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

// TestOpenAPIUsesOnlyCheckedSchemaKeywords reads every schema of the
// document, answers and requests alike: each keyword must be one the check
// implements, each $ref must resolve and each pattern must compile.
func TestOpenAPIUsesOnlyCheckedSchemaKeywords(t *testing.T) {
	t.Parallel()
	c, err := servedContract()
	require.NoError(t, err)
	var problems []string
	var lint func(s any, at string)
	lint = func(s any, at string) {
		m, ok := s.(map[string]any)
		if !ok {
			if _, isBool := s.(bool); !isBool {
				problems = append(problems, at+": not a schema")
			}
			return
		}
		for k := range m {
			if !slices.Contains(schemaKeywords, k) && !slices.Contains(schemaAnnotations, k) {
				problems = append(problems, fmt.Sprintf("%s: keyword %q is not checked", at, k))
			}
		}
		if ref, ok := m["$ref"].(string); ok && c.pointer(ref) == nil {
			problems = append(problems, at+": dangling $ref "+ref)
		}
		if p, ok := m["pattern"].(string); ok {
			if _, err := c.compiled(p); err != nil {
				problems = append(problems, fmt.Sprintf("%s: pattern: %v", at, err))
			}
		}
		if f, ok := m["format"].(string); ok && f != "date-time" {
			problems = append(problems, fmt.Sprintf("%s: format %q is not checked", at, f))
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for k, p := range props {
				lint(p, at+".properties."+k)
			}
		}
		for _, k := range []string{"items", "additionalProperties"} {
			if sub, ok := m[k]; ok {
				lint(sub, at+"."+k)
			}
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			for i, sub := range asList(m[k]) {
				lint(sub, fmt.Sprintf("%s.%s[%d]", at, k, i))
			}
		}
	}
	// Schemas sit under "schema" in parameters, headers and media types,
	// and in components/schemas.
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if k == "schema" {
					lint(sub, at+".schema")
					continue
				}
				walk(sub, at+"."+k)
			}
		case []any:
			for i, sub := range v {
				walk(sub, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	}
	walk(c.doc["paths"], "paths")
	comps := c.doc["components"].(map[string]any)
	for name, s := range comps["schemas"].(map[string]any) {
		lint(s, "components.schemas."+name)
	}
	for _, k := range []string{"parameters", "headers", "responses"} {
		walk(comps[k], "components."+k)
	}
	slices.Sort(problems)
	require.Empty(t, problems)
}

// queryParams are the names of an operation's query parameters.
func queryParams(t *testing.T, c *contract, op map[string]any) []string {
	t.Helper()
	var names []string
	for _, raw := range asList(op["parameters"]) {
		p, err := c.deref(raw)
		require.NoError(t, err)
		if p["in"] == "query" {
			names = append(names, p["name"].(string))
		}
	}
	return names
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// walkKeys are the keys of the walk: one per role, and an admin key
// scoped to a queue no sample uses, which is refused global views and the
// fixture's queues.
var walkKeys = append(slices.Clone(testKeys), APIKey{Role: RoleAdmin, Name: "scoped", Secret: "scoped-secret", Queues: []string{"elsewhere"}})

// roleKey is a key of each role, for the walk.
var roleKey = map[Role]string{RoleReader: "reader-secret", RoleProducer: "producer-secret", RoleAdmin: "admin-secret", RoleWorker: "worker-secret"}

// TestOpenAPIWalk sends every documented operation valid and invalid
// requests: allowed and refused keys, unknown query parameters, bodies of
// the wrong media type, malformed and oversized, unknown ids. The checker
// holds each answer to the document; at the end every operation must have
// answered a success and a refusal.
func TestOpenAPIWalk(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: walkKeys})
	f := newAuthFixture(t, b)
	samples := f.samples()
	c, err := servedContract()
	require.NoError(t, err)
	routes := map[string]route{}
	for _, rt := range b.api.routes {
		routes[rt.method+" "+rt.pattern] = rt
	}
	auth := func(secret string) []string {
		if secret == "" {
			return nil
		}
		return []string{"Authorization", "Bearer " + secret}
	}
	ops := slices.Sorted(maps.Keys(samples))
	for _, op := range ops {
		sm, rt := samples[op], routes[op]
		pattern, doc := c.operation(sm.method, strings.SplitN(sm.path, "?", 2)[0])
		require.Equal(t, op, pattern, "the sample of %s reaches another operation", op)
		require.NotNil(t, doc)
		key := auth(roleKey[rt.role])
		if sm.body != "" {
			// A body the server takes is one the document describes.
			schema := c.pointer("#/paths/" + escapePointer(strings.SplitN(op, " ", 2)[1]) + "/" + strings.ToLower(sm.method) +
				"/requestBody/content/application~1json/schema")
			require.NotNil(t, schema, "%s takes a body the document does not describe", op)
			var v any
			require.NoError(t, decodeJSON([]byte(sm.body), &v))
			require.Empty(t, c.validate(schema, v, "request body"), op)
		}

		res := sm.send(t, b, true, key...)
		if res.status != sm.ok {
			require.Less(t, res.status, 500, "%s: %s", op, res.body)
		}
		if rt.role == 0 {
			continue
		}
		b.do(t, sm.method, sm.path, sm.body).requireError(t, http.StatusUnauthorized, codeUnauthorized, "")
		b.do(t, sm.method, sm.path, sm.body, "Authorization", "Bearer wrong").requireError(t, http.StatusUnauthorized, codeUnauthorized, "")
		for _, k := range []string{"reader-secret", "worker-secret", "scoped-secret"} {
			sm.send(t, b, false, auth(k)...)
		}
		// A query parameter no route takes.
		sep := "?"
		if strings.Contains(sm.path, "?") {
			sep = "&"
		}
		path := sm.path
		if sm.fresh != nil {
			path = sm.fresh(t)
		}
		if res := b.do(t, sm.method, path+sep+"bogus=1", sm.body, key...); res.status >= 300 && res.status != sm.ok {
			// The refusal names the parameters the route takes: the
			// document lists the same.
			e := res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "bogus")
			var accepted []string
			if _, list, ok := strings.Cut(e.Message, "accepted: "); ok {
				accepted = strings.Split(list, ", ")
			}
			require.ElementsMatch(t, accepted, queryParams(t, c, doc), "%s: the query parameters the server takes (%s) and the document lists", op, e.Message)
		}
		if sm.method == http.MethodGet {
			continue
		}
		// Bodies: the wrong media type, malformed, not an object, too big.
		require.Equal(t, http.StatusUnsupportedMediaType, b.do(t, sm.method, sm.path, `{}`, append(key, "Content-Type", "text/plain")...).status, op)
		b.do(t, sm.method, sm.path, `{"x":`, key...).requireError(t, http.StatusBadRequest, codeInvalidRequest, "")
		b.do(t, sm.method, sm.path, `["x"]`, key...).requireError(t, http.StatusBadRequest, codeInvalidRequest, "")
		// Oversized bodies are the abuse tests' (TestAbuseBodies).
	}

	// Unknown and malformed ids and names.
	for _, op := range ops {
		sm, rt := samples[op], routes[op]
		key := auth(roleKey[rt.role])
		for _, bad := range []string{missingID, "not-an-id", "UPPER", "a%2Fb"} {
			path := sm.path
			for _, seg := range []string{f.taskID, f.dlqID, f.workerID, f.workflowID, authSchedule, "/idle", missingID} {
				if seg == "/idle" {
					path = strings.Replace(path, "/queues/idle", "/queues/"+bad, 1)
					continue
				}
				path = strings.Replace(path, seg, bad, 1)
			}
			if path != sm.path {
				b.do(t, sm.method, path, sm.body, key...)
			}
		}
	}

	walkHTTPWorker(t, b)
	walkEvents(t)
	walkOpenMode(t)

	// The same requests to a server whose Redis is down: the checker holds
	// its answers (503s, mostly) to the document.
	down := downServer(t)
	for _, op := range ops {
		sm := samples[op]
		down.do(t, sm.method, sm.path, sm.body)
	}

	// Every operation answered a success and a refusal (the feed's
	// successes are walkEvents').
	ac := b.srv.Config.Handler.(*answerChecker)
	for _, op := range ops {
		sts := ac.statuses(op)
		if op != "GET /api/v1/events" && op != "GET /ws/events" {
			require.True(t, slices.ContainsFunc(sts, func(s int) bool { return s >= 200 && s < 300 }), "%s answered no 2xx: %v", op, sts)
		}
		if routes[op].role != 0 {
			require.True(t, slices.ContainsFunc(sts, func(s int) bool { return s >= 400 && s < 500 }), "%s answered no 4xx: %v", op, sts)
		}
	}
}

// walkHTTPWorker claims, renews, completes and fails tasks over HTTP,
// among them tasks deleted as they finish (retention 0).
func walkHTTPWorker(t *testing.T, b *bundle) {
	t.Helper()
	key := []string{"Authorization", "Bearer worker-secret"}
	type leased struct {
		TaskID     string `json:"task_id"`
		LeaseToken string `json:"lease_token"`
	}
	claim := func(queue string) leased {
		t.Helper()
		var out struct{ Tasks []leased }
		res := b.do(t, http.MethodPost, "/api/v1/claims", `{"worker_id":"walker","queues":["`+queue+`"],"wait":"5s"}`, key...)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		res.decode(t, &out)
		require.Len(t, out.Tasks, 1)
		return out.Tasks[0]
	}
	token := func(l leased) string { return `{"lease_token":"` + l.LeaseToken + `"}` }
	for _, keep := range []string{"", `,"retention_seconds":0`} {
		for _, finish := range []string{"complete", "fail"} {
			q := "walk-" + newQueueSuffix()
			res := b.post(t, `{"task_type":"echo","queue":"`+q+`","max_attempts":1`+keep+`}`, "Authorization", "Bearer producer-secret")
			require.Equal(t, http.StatusAccepted, res.status, string(res.body))
			l := claim(q)
			res = b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/heartbeat", `{"lease_token":"`+l.LeaseToken+`","lease":"10s"}`, key...)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			// Progress and a line, then the same on a heartbeat (within the
			// window: not written) and again (429).
			res = b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/progress", `{"lease_token":"`+l.LeaseToken+`","progress":{"n":1},"logs":["walk"],"seq":1}`, key...)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			res = b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/heartbeat", `{"lease_token":"`+l.LeaseToken+`","progress":50,"seq":2}`, key...)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/progress", `{"lease_token":"`+l.LeaseToken+`","progress":60,"seq":3}`, key...)
			body := token(l)
			if finish == "fail" {
				body = `{"lease_token":"` + l.LeaseToken + `","error":{"class":"Walk","message":"no"},"retryable":false}`
			}
			res = b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/"+finish, body, key...)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			// Sent again: complete answers the same, fail and heartbeat
			// find the lease gone.
			b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/"+finish, body, key...)
			b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/heartbeat", token(l), key...)
		}
	}
	// A cancel requested while the task runs: the failure ends it
	// cancelled, and with retention 0 deleted.
	q := "walk-" + newQueueSuffix()
	res := b.post(t, `{"task_type":"echo","queue":"`+q+`","retention_seconds":0}`, "Authorization", "Bearer producer-secret")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	l := claim(q)
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/cancel", "", "Authorization", "Bearer admin-secret")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/fail", token(l), key...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.JSONEq(t, `{"task_id":"`+l.TaskID+`"}`, string(res.body))

	// A workflow node fans out while it runs.
	wq := "walk-" + newQueueSuffix()
	res = b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"root","task_type":"echo","queue":"`+wq+`"}]}`,
		"Authorization", "Bearer producer-secret")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	l = claim(wq)
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/nodes",
		`{"lease_token":"`+l.LeaseToken+`","nodes":[{"ref":"leaf","task_type":"echo","queue":"`+wq+`","deps":["root"]}]}`, key...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/complete", token(l), key...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))

	// The task a worker runs shows in its record.
	id := b.submit(t, dtq.Submission{Type: "echo", Queue: "walk-running"})
	l = claim("walk-running")
	require.Equal(t, id, l.TaskID)
	b.waitStatus(t, id, dtqtype.StatusRunning)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/workers/walker", "", "Authorization", "Bearer reader-secret").status)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "", "Authorization", "Bearer reader-secret").status)
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/cancel", "", "Authorization", "Bearer admin-secret").status)
}

// walkEvents opens the event feed over SSE and WebSocket on a server
// with a feed, and sends it requests it refuses.
func walkEvents(t *testing.T) {
	t.Helper()
	b := setup(t, options{keys: walkKeys, feed: &feedOptions{maxSubscribers: 1}})
	key := []string{"Authorization", "Bearer reader-secret"}

	ctx, cancel := context.WithCancel(b.ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+"/api/v1/events?queue=idle", nil)
	require.NoError(t, err)
	req.Header.Set(key[0], key[1])
	res, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	// The feed holds one client: a second one is refused.
	b.do(t, http.MethodGet, "/api/v1/events", "", key...).requireError(t, http.StatusServiceUnavailable, "TOO_MANY_SUBSCRIBERS", "")
	cancel()
	require.NoError(t, res.Body.Close())
	// The server frees the slot when it sees the client gone, a moment
	// after the close: until then a new client is refused, truthfully.
	// Wait for the slot itself (a bad query, answered before any slot is
	// taken, would say nothing about it).
	feed := b.api.cfg.Events.(subscriberCounter)
	require.Eventually(t, func() bool {
		open, _ := feed.SubscriberCounts()
		return open == 0
	}, 10*time.Second, 5*time.Millisecond, "the first stream's subscription never ended")

	conn, wsRes, err := websocket.Dial(b.ctx, "ws"+strings.TrimPrefix(b.srv.URL, "http")+"/ws/events?queue=idle",
		&websocket.DialOptions{HTTPClient: b.srv.Client(), HTTPHeader: http.Header{key[0]: {key[1]}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, wsRes.StatusCode)
	require.NoError(t, conn.Close(websocket.StatusNormalClosure, ""))

	for _, path := range []string{"/api/v1/events?since=yesterday", "/ws/events?since=yesterday", "/api/v1/events?bogus=1", "/ws/events"} {
		require.GreaterOrEqual(t, b.do(t, http.MethodGet, path, "", key...).status, 400, path)
	}
	b.do(t, http.MethodGet, "/api/v1/events?queue=idle", "", "Authorization", "Bearer scoped-secret").
		requireError(t, http.StatusForbidden, codeForbidden, "")
}

// walkOpenMode sends every operation to an open-mode server under a Host
// it does not answer: all but /health and /ready are refused with 421.
func walkOpenMode(t *testing.T) {
	t.Helper()
	b := setup(t, options{})
	c, err := servedContract()
	require.NoError(t, err)
	for path, item := range c.doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			p := strings.NewReplacer("{id}", missingID, "{task_id}", missingID, "{queue}", "q", "{name}", "s").Replace(path)
			res := b.doHost(t, strings.ToUpper(method), p, "evil.example", "")
			if path == "/health" || path == "/ready" {
				require.Equal(t, http.StatusOK, res.status, path)
				continue
			}
			res.requireError(t, http.StatusMisdirectedRequest, codeForbidden, "")
		}
	}
}
