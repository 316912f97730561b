package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// scheduleJSON is the part of a schedule answer tests look at.
type scheduleJSON struct {
	Name        string         `json:"name"`
	Spec        string         `json:"spec"`
	Timezone    string         `json:"timezone"`
	Queue       string         `json:"queue"`
	TaskType    string         `json:"task_type"`
	Payload     map[string]any `json:"payload"`
	Priority    int            `json:"priority"`
	Paused      bool           `json:"paused"`
	NextRunAt   *string        `json:"next_run_at"`
	LastRunAt   *string        `json:"last_run_at"`
	LastTaskID  *string        `json:"last_task_id"`
	Version     int            `json:"version"`
	MaxAttempts int            `json:"max_attempts"`
}

func TestScheduleRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	body := `{"spec":"0 9 * * 1-5","timezone":"Europe/Paris","queue":"reports","task_type":"report","payload":{"kind":"daily"},"priority":7}`
	res := b.do(t, http.MethodPut, "/api/v1/schedules/weekday-report", body)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	var s scheduleJSON
	res.decode(t, &s)
	require.Equal(t, "weekday-report", s.Name)
	require.Equal(t, "Europe/Paris", s.Timezone)
	require.Equal(t, 7, s.Priority)
	require.Equal(t, 5, s.MaxAttempts)
	require.Equal(t, "daily", s.Payload["kind"])
	require.NotNil(t, s.NextRunAt)
	require.True(t, strings.HasSuffix(*s.NextRunAt, ":00:00.000Z"), *s.NextRunAt)
	require.Nil(t, s.LastTaskID)

	res = b.do(t, http.MethodPut, "/api/v1/schedules/weekday-report", `{"name":"weekday-report","spec":"@every 1h","task_type":"report","queue":"reports"}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	res.decode(t, &s)
	require.Equal(t, 2, s.Version)
	require.Equal(t, "UTC", s.Timezone)

	b.do(t, http.MethodPut, "/api/v1/schedules/another", `{"spec":"@every 1m","task_type":"t"}`)
	var list struct {
		Items      []scheduleJSON `json:"items"`
		NextCursor *string        `json:"next_cursor"`
	}
	b.do(t, http.MethodGet, "/api/v1/schedules?limit=1", "").decode(t, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, "another", list.Items[0].Name)
	require.NotNil(t, list.NextCursor)
	b.do(t, http.MethodGet, "/api/v1/schedules?limit=1&cursor="+*list.NextCursor, "").decode(t, &list)
	require.Equal(t, "weekday-report", list.Items[0].Name)
	require.Nil(t, list.NextCursor)
	b.do(t, http.MethodGet, "/api/v1/schedules?queue=reports", "").decode(t, &list)
	require.Len(t, list.Items, 1)

	res = b.do(t, http.MethodPost, "/api/v1/schedules/weekday-report/pause", "")
	require.Equal(t, http.StatusOK, res.status)
	var p struct {
		Paused, Changed bool
		Schedule        scheduleJSON
	}
	res.decode(t, &p)
	require.True(t, p.Paused)
	require.True(t, p.Changed)
	require.Nil(t, p.Schedule.NextRunAt, "no next run while paused")

	res = b.do(t, http.MethodPost, "/api/v1/schedules/weekday-report/trigger", "{}")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var task struct {
		TaskID   string         `json:"task_id"`
		Queue    string         `json:"queue"`
		Status   string         `json:"status"`
		Metadata map[string]any `json:"metadata"`
	}
	res.decode(t, &task)
	require.Equal(t, "reports", task.Queue)
	require.Equal(t, "queued", task.Status)
	require.Equal(t, "weekday-report", task.Metadata["schedule"])
	require.Equal(t, true, task.Metadata["triggered"])
	b.do(t, http.MethodGet, "/api/v1/schedules/weekday-report", "").decode(t, &s)
	require.Equal(t, task.TaskID, *s.LastTaskID)
	require.NotNil(t, s.LastRunAt)

	res = b.do(t, http.MethodPost, "/api/v1/schedules/weekday-report/resume", "")
	require.Equal(t, http.StatusOK, res.status)
	res.decode(t, &p)
	require.False(t, p.Paused)
	require.NotNil(t, p.Schedule.NextRunAt)

	require.Equal(t, http.StatusOK, b.do(t, http.MethodDelete, "/api/v1/schedules/weekday-report", "").status)
	for _, rq := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/schedules/weekday-report"},
		{http.MethodDelete, "/api/v1/schedules/weekday-report"},
		{http.MethodPost, "/api/v1/schedules/weekday-report/pause"},
		{http.MethodPost, "/api/v1/schedules/weekday-report/resume"},
		{http.MethodPost, "/api/v1/schedules/weekday-report/trigger"},
	} {
		b.do(t, rq.method, rq.path, "").requireError(t, http.StatusNotFound, codeScheduleNotFound, "")
	}

	// Every change is in the audit log.
	var actions []string
	for _, e := range b.audit(t) {
		if e.Target == "weekday-report" {
			actions = append(actions, e.Action)
		}
	}
	slices.Reverse(actions)
	require.Equal(t, []string{"schedule.put", "schedule.put", "schedule.pause", "schedule.trigger", "schedule.resume", "schedule.delete"}, actions)
}

func TestScheduleValidationErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	cases := []struct {
		name, path, body, field string
	}{
		{"invalid cron", "nightly", `{"spec":"0 25 * * *","task_type":"t"}`, "spec"},
		{"six fields", "nightly", `{"spec":"0 0 0 * * *","task_type":"t"}`, "spec"},
		{"every too short", "nightly", `{"spec":"@every 100ms","task_type":"t"}`, "spec"},
		{"every not a duration", "nightly", `{"spec":"@every often","task_type":"t"}`, "spec"},
		{"no spec", "nightly", `{"task_type":"t"}`, "spec"},
		{"spec not a string", "nightly", `{"spec":5,"task_type":"t"}`, "spec"},
		{"unknown timezone", "nightly", `{"spec":"@daily","timezone":"Moon/Base","task_type":"t"}`, "timezone"},
		{"no task type", "nightly", `{"spec":"@daily"}`, "task_type"},
		{"bad queue", "nightly", `{"spec":"@daily","task_type":"t","queue":"A B"}`, "queue"},
		{"priority", "nightly", `{"spec":"@daily","task_type":"t","priority":12}`, "priority"},
		{"payload", "nightly", `{"spec":"@daily","task_type":"t","payload":[1]}`, "payload"},
		{"unknown field", "nightly", `{"spec":"@daily","task_type":"t","delay_ms":5}`, "delay_ms"},
		{"name differs", "nightly", `{"name":"other","spec":"@daily","task_type":"t"}`, "name"},
		{"bad name", "Nightly", `{"spec":"@daily","task_type":"t"}`, "name"},
		{"name with a slash", "a%2Fb", `{"spec":"@daily","task_type":"t"}`, "name"},
		{"spec too long", "nightly", `{"spec":"0` + strings.Repeat(",0", 10<<10) + ` * * * *","task_type":"t"}`, "spec"},
		{"timezone too long", "nightly", `{"spec":"@daily","timezone":"Europe/` + strings.Repeat("x", 100) + `","task_type":"t"}`, "timezone"},
	}
	for _, c := range cases {
		res := b.do(t, http.MethodPut, "/api/v1/schedules/"+c.path, c.body)
		e := res.requireError(t, http.StatusBadRequest, codeInvalidRequest, c.field)
		require.NotEmpty(t, e.Message, c.name)
	}
	b.do(t, http.MethodPut, "/api/v1/schedules/nightly", `[1]`).requireError(t, http.StatusBadRequest, codeInvalidRequest, "")
	b.do(t, http.MethodPut, "/api/v1/schedules/nightly", `{"spec":`).requireError(t, http.StatusBadRequest, codeInvalidRequest, "")
	b.do(t, http.MethodPut, "/api/v1/schedules/nightly", `{"spec":"@daily","task_type":"t"}`, "Content-Type", "text/plain").
		requireError(t, http.StatusUnsupportedMediaType, codeInvalidRequest, "Content-Type")
	b.do(t, http.MethodGet, "/api/v1/schedules?limit=0", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "limit")
	b.do(t, http.MethodGet, "/api/v1/schedules?cursor=%21", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "cursor")
	b.do(t, http.MethodGet, "/api/v1/schedules?queue=A", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "queue")
	b.do(t, http.MethodGet, "/api/v1/schedules?sort=x", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "sort")
	require.Zero(t, b.keyCount(t), "nothing was written")
}

// Odd names, queries and bodies on every schedule route are client errors
// or not-found answers, never a 5xx.
func TestScheduleOddInputs(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.do(t, http.MethodPut, "/api/v1/schedules/ok", `{"spec":"@every 1h","task_type":"t"}`)
	odd := []string{"ok", "x", "%00", "%ff", "..", strings.Repeat("a", 200), "-a", "_", "a.b", "%7B%7D"}
	bodies := []string{"", "{}", `{"x":1}`, "[1]", `{"spec":"@every 1h","task_type":"t","metadata":{"a":` + strings.Repeat("[", 70) + `}}`,
		`{"spec":"@every 99999999h","task_type":"t"}`, `{"spec":"` + strings.Repeat("* ", 500) + `","task_type":"t"}`}
	for _, v := range odd {
		for _, p := range []struct{ method, path string }{
			{http.MethodGet, "/api/v1/schedules/" + v},
			{http.MethodPut, "/api/v1/schedules/" + v},
			{http.MethodDelete, "/api/v1/schedules/" + v + "x"},
			{http.MethodPost, "/api/v1/schedules/" + v + "/pause"},
			{http.MethodPost, "/api/v1/schedules/" + v + "/resume"},
			{http.MethodPost, "/api/v1/schedules/" + v + "/trigger"},
			{http.MethodGet, "/api/v1/schedules?cursor=" + v},
		} {
			for _, body := range bodies {
				res := b.do(t, p.method, p.path, body)
				require.Less(t, res.status, 500, "%s %s %q: %s", p.method, p.path, body, res.body)
				if res.status >= 400 {
					res.errBody(t)
				}
			}
		}
	}
}

func TestScopedKeySchedules(t *testing.T) {
	t.Parallel()
	keys := []APIKey{{Role: RoleAdmin, Name: "billing", Secret: "billing-secret", Queues: []string{"billing"}},
		{Role: RoleAdmin, Name: "root", Secret: "root-secret"}}
	b := setup(t, options{keys: keys})
	mine := []string{"Authorization", "Bearer billing-secret"}
	root := []string{"Authorization", "Bearer root-secret"}
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPut, "/api/v1/schedules/invoices", `{"spec":"@daily","task_type":"t","queue":"billing"}`, mine...).status)
	require.Equal(t, http.StatusCreated, b.do(t, http.MethodPut, "/api/v1/schedules/payroll", `{"spec":"@daily","task_type":"t","queue":"payroll"}`, root...).status)

	var list struct {
		Items []scheduleJSON `json:"items"`
	}
	b.do(t, http.MethodGet, "/api/v1/schedules", "", mine...).decode(t, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, "invoices", list.Items[0].Name)
	b.do(t, http.MethodGet, "/api/v1/schedules?queue=payroll", "", mine...).requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodGet, "/api/v1/schedules/payroll", "", mine...).requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodPost, "/api/v1/schedules/payroll/trigger", "", mine...).requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodDelete, "/api/v1/schedules/payroll", "", mine...).requireError(t, http.StatusForbidden, codeForbidden, "")
	// Neither moving one's schedule to another queue nor taking over another's.
	b.do(t, http.MethodPut, "/api/v1/schedules/invoices", `{"spec":"@daily","task_type":"t","queue":"payroll"}`, mine...).
		requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodPut, "/api/v1/schedules/payroll", `{"spec":"@daily","task_type":"t","queue":"billing"}`, mine...).
		requireError(t, http.StatusForbidden, codeForbidden, "")
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/api/v1/schedules/invoices/trigger", "", mine...).status)
}

// The trigger answer has the members openapi.json documents for it: every
// required one, and none it does not describe.
func TestScheduleTriggerAnswerMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var doc map[string]any
	b.do(t, http.MethodGet, "/api/v1/openapi.json", "").decode(t, &doc)
	at := func(v any, path ...string) any {
		for _, p := range path {
			m, ok := v.(map[string]any)
			require.True(t, ok, "openapi.json: %v has no %q", path, p)
			v = m[p]
		}
		return v
	}
	// fields collects the required and described members of a schema,
	// following $ref and allOf.
	required, described := map[string]bool{}, map[string]bool{}
	var fields func(schema any)
	fields = func(schema any) {
		m, ok := schema.(map[string]any)
		require.True(t, ok, "schema %v", schema)
		if ref, ok := m["$ref"].(string); ok {
			fields(at(doc, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...))
			return
		}
		for _, sub := range asSlice(m["allOf"]) {
			fields(sub)
		}
		for _, r := range asSlice(m["required"]) {
			required[r.(string)] = true
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for k := range props {
				described[k] = true
			}
		}
	}
	fields(at(doc, "paths", "/api/v1/schedules/{name}/trigger", "post", "responses", "202", "content", "application/json", "schema"))
	require.NotEmpty(t, required)

	b.do(t, http.MethodPut, "/api/v1/schedules/nightly", `{"spec":"@daily","queue":"reports","task_type":"report"}`)
	res := b.do(t, http.MethodPost, "/api/v1/schedules/nightly/trigger", "")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var answer map[string]any
	res.decode(t, &answer)
	for f := range required {
		require.Contains(t, answer, f, "the answer lacks required member %q: %s", f, res.body)
	}
	for f := range answer {
		require.True(t, described[f], "the answer has member %q that openapi.json does not describe", f)
	}
	require.Equal(t, false, answer["duplicate"])
	require.Equal(t, "reports", answer["queue"])
	require.Equal(t, "report", answer["task_type"])
	var s scheduleJSON
	b.do(t, http.MethodGet, "/api/v1/schedules/nightly", "").decode(t, &s)
	require.Equal(t, answer["task_id"], *s.LastTaskID)
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
