package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

func TestParseScopedKeys(t *testing.T) {
	t.Parallel()
	keys, err := ParseAPIKeys("producer:billing:s3:cr:et:queues=billing,invoices, reader:all:r1,admin:ops:a1:queues=ops")
	require.NoError(t, err)
	require.Equal(t, []APIKey{
		{Role: RoleProducer, Name: "billing", Secret: "s3:cr:et", Queues: []string{"billing", "invoices"}},
		{Role: RoleReader, Name: "all", Secret: "r1"},
		{Role: RoleAdmin, Name: "ops", Secret: "a1", Queues: []string{"ops"}},
	}, keys)

	for _, bad := range []string{
		"reader:x:s:queues=",     // no queue
		"reader:x:s:queues=Bad",  // invalid name
		"reader:x:s:queues=a,B!", // invalid continuation
		"reader:x:s,orphan",      // a continuation without a scoped key
		"reader:x:s:queues=a,,b", // an empty element
	} {
		_, err := ParseAPIKeys(bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), ":s:", "the secret is not echoed")
	}
}

// TestScopeMatrix sends every route's sample with keys of every role,
// scoped to the fixture's queues (in) or to another queue (out).
func TestScopeMatrix(t *testing.T) {
	t.Parallel()
	in := "idle,dlq,default,empty"
	var keys []APIKey
	for _, role := range []Role{RoleReader, RoleProducer, RoleWorker, RoleAdmin} {
		keys = append(keys,
			APIKey{Role: role, Name: role.String() + "-in", Secret: role.String() + "-in-secret", Queues: strings.Split(in, ",")},
			APIKey{Role: role, Name: role.String() + "-out", Secret: role.String() + "-out-secret", Queues: []string{"elsewhere"}})
	}
	b := setup(t, options{keys: keys})
	reqs := newAuthFixture(t, b).samples()

	for _, rt := range b.api.routes {
		sm := reqs[rt.method+" "+rt.pattern]
		for _, k := range keys {
			where := rt.method + " " + rt.pattern + " with " + k.Name
			allowed := rt.role == 0 || k.Role.Grants(rt.role)
			inScope := strings.HasSuffix(k.Name, "-in")
			// Queues made up by the samples themselves are in no scope.
			madeUp := rt.pattern == "/api/v1/queues/{queue}" && rt.method != http.MethodGet
			// A key of several queues must say which one a list is about; a
			// key of one gets that one's (here: empty) list, and a feed
			// without ?queue= reads the key's queues.
			unnamed := rt.scope == scopeQuery && !strings.Contains(sm.path, "queue=")
			single := unnamed && len(k.Queues) == 1 || rt.scope == scopeQueueList && !strings.Contains(sm.path, "queue=")
			reaches := allowed && (rt.scope == scopeOpen || rt.scope == scopeInHandler && (rt.pattern == "/api/v1/queues" || rt.pattern == "/api/v1/schedules") ||
				single || inScope && rt.scope != scopeGlobal && !madeUp && !unnamed)
			// A refused id must be a real one: an unknown id is 404 for anyone.
			fresh := reaches || allowed && (rt.scope == scopeTaskID || madeUp)
			res := sm.send(t, b, fresh, "Authorization", "Bearer "+k.Secret)
			switch {
			case !allowed:
				e := res.requireError(t, http.StatusForbidden, codeForbidden, "")
				require.Equal(t, rt.role.String(), e.Details["required_role"], where)
			case reaches:
				require.Equal(t, sm.ok, res.status, "%s: %s", where, res.body)
			case rt.pattern == "/api/v1/tasks/batch":
				// A batch answers per item.
				require.Equal(t, http.StatusOK, res.status, where)
				require.Contains(t, string(res.body), `"http_status":403`, where)
			default:
				e := res.requireError(t, http.StatusForbidden, codeForbidden, "")
				require.NotNil(t, e.Details["queues"], where)
			}
		}
	}
}

// TestScopedKeySeesItsQueuesOnly checks the answers, not just the status.
func TestScopedKeySeesItsQueuesOnly(t *testing.T) {
	t.Parallel()
	keys := []APIKey{{Role: RoleProducer, Name: "billing", Secret: "billing-secret", Queues: []string{"billing", "invoices"}},
		{Role: RoleAdmin, Name: "root", Secret: "root-secret"}}
	b := setup(t, options{keys: keys})
	auth := []string{"Authorization", "Bearer billing-secret"}
	mine := b.submit(t, dtq.Submission{Type: "echo", Queue: "billing"})
	theirs := b.submit(t, dtq.Submission{Type: "echo", Queue: "payroll"})

	var list struct {
		Items []struct {
			Name string `json:"queue"`
		} `json:"items"`
	}
	b.do(t, http.MethodGet, "/api/v1/queues", "", auth...).decode(t, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, "billing", list.Items[0].Name)

	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/tasks/"+mine, "", auth...).status)
	e := b.do(t, http.MethodGet, "/api/v1/tasks/"+theirs, "", auth...).requireError(t, http.StatusForbidden, codeForbidden, "")
	require.Equal(t, "payroll", e.Details["queue"])
	b.do(t, http.MethodGet, "/api/v1/tasks", "", auth...).requireError(t, http.StatusForbidden, codeForbidden, "")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/tasks?queue=invoices", "", auth...).status)
	b.post(t, `{"task_type":"echo","queue":"payroll"}`, auth...).requireError(t, http.StatusForbidden, codeForbidden, "")
	b.post(t, `{"task_type":"echo"}`, auth...).requireError(t, http.StatusForbidden, codeForbidden, "")
	require.Equal(t, http.StatusAccepted, b.post(t, `{"task_type":"echo","queue":"invoices"}`, auth...).status)

	res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", `{"tasks":[{"task_type":"echo","queue":"billing"},{"task_type":"echo","queue":"payroll"}]}`, auth...)
	require.Equal(t, http.StatusOK, res.status)
	var batch batchJSON
	res.decode(t, &batch)
	require.Equal(t, http.StatusAccepted, batch.Items[0].HTTPStatus)
	require.Equal(t, http.StatusForbidden, batch.Items[1].HTTPStatus)
	require.Equal(t, codeForbidden, batch.Items[1].Error.Code)

	b.do(t, http.MethodGet, "/api/v1/events?queue=billing,payroll", "", auth...).requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodGet, "/metrics", "", auth...).requireError(t, http.StatusForbidden, codeForbidden, "")
}
