package dtqoutbox

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// fieldCheck checks that submission s's task shows one Submission field.
type fieldCheck func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo)

// taskShows holds a check per field of dtq.Submission, by name. A field
// added to dtq.Submission fails TestOutboxRoundTripsEverySubmissionField
// until it has a check here (and the row's codec writes it).
var taskShows = map[string]fieldCheck{
	"Queue": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) { require.Equal(t, s.Queue, ti.Queue) },
	"Type":  func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) { require.Equal(t, s.Type, ti.Type) },
	"Payload": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		want, err := json.Marshal(s.Payload)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(ti.Payload))
	},
	"Priority": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		require.Equal(t, *s.Priority, ti.Priority)
	},
	"MaxAttempts": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		require.Equal(t, s.MaxAttempts, ti.MaxAttempts)
	},
	"Timeout": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		require.Equal(t, s.Timeout.Milliseconds(), ti.TimeoutMS)
	},
	"Delay": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		if s.RunAt.IsZero() { // RunAt overrides it
			require.Equal(t, s.Delay, ti.AvailableAt.Sub(ti.CreatedAt.Time))
		}
	},
	"RunAt": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		if !s.RunAt.IsZero() {
			require.Equal(t, s.RunAt.UnixMilli(), ti.AvailableAt.UnixMilli())
		}
	},
	"ExpiresAt": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		if !s.ExpiresAt.IsZero() {
			require.Equal(t, s.ExpiresAt.UnixMilli(), ti.ExpiresAt.UnixMilli())
		}
	},
	"TTL": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		if s.ExpiresAt.IsZero() { // ExpiresAt overrides it
			require.Equal(t, s.TTL, ti.ExpiresAt.Sub(ti.CreatedAt.Time))
		}
	},
	"Metadata": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		require.JSONEq(t, string(s.Metadata.(json.RawMessage)), string(ti.Metadata))
	},
	"IdempotencyKey": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		require.NotNil(t, ti.IdempotencyKey)
		require.Equal(t, s.IdempotencyKey, *ti.IdempotencyKey)
	},
	"ConcurrencyKey": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		require.Equal(t, s.ConcurrencyKey, ti.ConcurrencyKey)
	},
	"Retention": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		require.NotNil(t, ti.RetentionSeconds)
		require.Equal(t, int64(s.Retention/time.Second), *ti.RetentionSeconds)
	},
	"KeepPayload": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		require.Equal(t, s.KeepPayload, ti.KeepPayload)
	},
	"Dedup": func(t *testing.T, s *dtq.Submission, ti *dtqtype.TaskInfo) {
		require.Equal(t, s.Dedup.Key, ti.DedupKey)
	},
}

// TestOutboxRoundTripsEverySubmissionField: a submission with every field
// set goes through Insert, the table and the relay; the row reads back as
// the submission, and its task shows every field. Twice: with RunAt and
// ExpiresAt (which override Delay and TTL), and without them.
func TestOutboxRoundTripsEverySubmissionField(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[dtq.Submission]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() {
			require.Contains(t, taskShows, f.Name, "dtq.Submission.%s has no check: add one to taskShows", f.Name)
		}
	}
	g := newRig(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	absolute := dtq.Submission{
		Queue: "outbox", Type: "job", Payload: json.RawMessage(`{"user":"a","n":[1,2.50]}`),
		Priority: new(7), MaxAttempts: 3, Timeout: 90 * time.Second, Delay: 2 * time.Hour,
		RunAt: now.Add(time.Hour), ExpiresAt: now.Add(4 * time.Hour), TTL: 3 * time.Hour,
		Metadata:       json.RawMessage(`{"src":"db"}`),
		IdempotencyKey: "order-1", ConcurrencyKey: "acme", Retention: 2 * time.Hour, KeepPayload: true,
		Dedup: &dtq.Dedup{Key: "doc-1", Mode: dtq.DedupDrop, TTL: time.Minute},
	}
	v := reflect.ValueOf(absolute)
	for i := range v.NumField() {
		require.False(t, v.Field(i).IsZero(), "the test sets dtq.Submission.%s", typ.Field(i).Name)
	}
	relative := absolute
	relative.RunAt, relative.ExpiresAt = time.Time{}, time.Time{}
	relative.IdempotencyKey = "order-2"
	relative.Dedup = &dtq.Dedup{Key: "doc-2", Mode: dtq.DedupDrop, TTL: time.Minute}

	names := []string{"absolute", "relative"}
	subs := []dtq.Submission{absolute, relative}
	ids := make([]int64, len(subs))
	tx, err := g.db.db.BeginTx(g.ctx, nil)
	require.NoError(t, err)
	for i := range subs {
		ids[i], err = Insert(g.ctx, tx, subs[i])
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	g.relay(t, nil)
	g.settled(t)

	for i, s := range subs {
		var body []byte
		var taskID *string
		require.NoError(t, g.db.db.QueryRow(`SELECT submission, task_id FROM dtq_outbox WHERE id = $1`, ids[i]).Scan(&body, &taskID))
		require.NotNil(t, taskID, "row %d was sent", ids[i])
		var back dtq.Submission
		require.NoError(t, back.UnmarshalJSON(body))
		// jsonb keeps the objects' members, not their order or spacing.
		require.JSONEq(t, string(s.Payload.(json.RawMessage)), string(back.Payload.(json.RawMessage)))
		require.JSONEq(t, string(s.Metadata.(json.RawMessage)), string(back.Metadata.(json.RawMessage)))
		want := s
		want.Payload, want.Metadata, back.Payload, back.Metadata = nil, nil, nil, nil
		require.Equal(t, want, back, "the row holds the submission")

		ti, err := g.insp.GetTask(g.ctx, *taskID)
		require.NoError(t, err)
		for name, check := range taskShows {
			t.Run(names[i]+"/"+name, func(t *testing.T) { check(t, &s, ti) })
		}
		// The dedup mode came through too: another submission of its key is dropped.
		res, err := g.client.Submit(g.ctx, dtq.Submission{Queue: "outbox", Type: "job", Dedup: s.Dedup})
		require.NoError(t, err)
		require.Equal(t, dtq.DedupDrop, res.Deduplicated)
		require.Equal(t, ti.ID, res.TaskID)
	}
}
