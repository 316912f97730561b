package rdb

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// TestDecodeIngestWellFormed: each reply shape of ingest.lua's header.
func TestDecodeIngestWellFormed(t *testing.T) {
	t.Parallel()
	hash := []any{"type", "t", "status", "queued", "created_at", "5"}
	res := "done"
	tests := []struct {
		name  string
		reply any
		want  IngestResult
	}{
		{"created, status alone", "pending", IngestResult{Outcome: Created, TaskID: "a", Status: dtqtype.StatusPending}},
		{"created with a replaced task", []any{"created", "a", "queued", "b"},
			IngestResult{Outcome: Created, TaskID: "a", Status: dtqtype.StatusQueued, Replaced: "b"}},
		{"deduplicated", []any{"deduplicated", "b", "drop", hash, res}, IngestResult{Outcome: Deduplicated, TaskID: "b", Mode: "drop",
			Task: decodeTask("q", "b", map[string]string{"type": "t", "status": "queued", "created_at": "5"}, &res)}},
		{"deduplicated into a task gone", []any{"deduplicated", "b", "drop", []any{}, nil},
			IngestResult{Outcome: Deduplicated, TaskID: "b", Mode: "drop"}},
		{"duplicate", []any{"duplicate", "b", hash, nil}, IngestResult{Outcome: Duplicate, TaskID: "b",
			Task: decodeTask("q", "b", map[string]string{"type": "t", "status": "queued", "created_at": "5"}, nil)}},
		{"in progress", []any{"in_progress", "b"}, IngestResult{Outcome: InProgress, TaskID: "b"}},
		{"mismatch", []any{"mismatch", "b"}, IngestResult{Outcome: Mismatch, TaskID: "b"}},
		{"absent", []any{"absent", "a"}, IngestResult{Outcome: Absent, TaskID: "a"}},
		{"full", []any{"full", "17"}, IngestResult{Outcome: QueueFull, Depth: 17}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeIngest("q", []NewTask{{ID: "a"}}, tt.reply)
			require.NoError(t, err)
			require.Equal(t, []IngestResult{tt.want}, got)
		})
	}
	got, err := decodeIngest("q", []NewTask{{ID: "a"}, {ID: "c"}}, []any{"queued", []any{"full", "3"}})
	require.NoError(t, err)
	require.Equal(t, []IngestResult{{Outcome: Created, TaskID: "a", Status: dtqtype.StatusQueued}, {Outcome: QueueFull, Depth: 3}}, got)
}

// TestDecodeIngestMalformed: a short or mistyped reply of the ingest
// script is an error naming it, never a panic.
func TestDecodeIngestMalformed(t *testing.T) {
	t.Parallel()
	hash := []any{"type", "t"}
	tests := []struct {
		name  string
		n     int // tasks sent
		reply any
	}{
		{"nil", 1, nil},
		{"a number", 1, int64(3)},
		{"empty status", 1, ""},
		{"empty list", 1, []any{}},
		{"code not text", 1, []any{int64(1), "a"}},
		{"code alone", 1, []any{"created"}},
		{"unknown code", 1, []any{"maybe", "a"}},
		{"id not text", 1, []any{"in_progress", int64(7)}},
		{"created without status", 1, []any{"created", "a"}},
		{"created, status not text", 1, []any{"created", "a", int64(1)}},
		{"created, replaced not text", 1, []any{"created", "a", "queued", []any{}}},
		{"created, too long", 1, []any{"created", "a", "queued", "b", "c"}},
		{"deduplicated, id only", 1, []any{"deduplicated", "b"}},
		{"deduplicated, no result", 1, []any{"deduplicated", "b", "drop", hash}},
		{"deduplicated, mode not text", 1, []any{"deduplicated", "b", nil, hash, nil}},
		{"deduplicated, hash not a list", 1, []any{"deduplicated", "b", "drop", "type", nil}},
		{"deduplicated, hash odd", 1, []any{"deduplicated", "b", "drop", []any{"type"}, nil}},
		{"deduplicated, hash value not text", 1, []any{"deduplicated", "b", "drop", []any{"type", int64(1)}, nil}},
		{"deduplicated, result mistyped", 1, []any{"deduplicated", "b", "drop", hash, int64(1)}},
		{"duplicate, short", 1, []any{"duplicate", "b", hash}},
		{"duplicate, hash not a list", 1, []any{"duplicate", "b", int64(0), nil}},
		{"duplicate, result mistyped", 1, []any{"duplicate", "b", hash, []any{}}},
		{"in progress, too long", 1, []any{"in_progress", "b", "c"}},
		{"full, depth not a number", 1, []any{"full", "many"}},
		{"full, depth not text", 1, []any{"full", int64(3)}},
		{"two tasks, one reply", 2, "queued"},
		{"two tasks, short list", 2, []any{"queued"}},
		{"two tasks, one malformed", 2, []any{"queued", []any{"created"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tasks := make([]NewTask, tt.n)
			for i := range tasks {
				tasks[i].ID = "a"
			}
			var err error
			require.NotPanics(t, func() { _, err = decodeIngest("q", tasks, tt.reply) })
			require.ErrorContains(t, err, "ingest script")
		})
	}
}
