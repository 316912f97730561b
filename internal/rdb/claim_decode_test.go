package rdb

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecodeClaimedReadsTheFlatReply(t *testing.T) {
	t.Parallel()
	id := NewTaskID(1, time.UnixMilli(1700000000000))
	tests := []struct {
		name string
		flat []string
		want []ClaimedTask
	}{
		{"empty", nil, nil},
		{"plain, created_at in the id", []string{"3 1 30000 5  0 5 " + id, "a b\tc", "{}", "{}"},
			[]ClaimedTask{{Queue: "q", ID: id, Attempt: 1, Type: "a b\tc", Payload: []byte("{}"), TimeoutMS: 30000,
				MaxAttempts: 5, CreatedAt: TaskIDTime(id).UnixMilli(), Metadata: []byte("{}"), Priority: 5}}},
		{"idempotency key and a cancel request", []string{"4 2 10 3 1700000000000 1 9 " + id, "t", "p", `{"m":1}`, "order 17"},
			[]ClaimedTask{{Queue: "q", ID: id, Attempt: 2, Type: "t", Payload: []byte("p"), TimeoutMS: 10, MaxAttempts: 3,
				IdempotencyKey: "order 17", CreatedAt: 1700000000000, CancelRequested: true, Metadata: []byte(`{"m":1}`),
				Priority: 9}}},
		{"workflow node, then a plain task", []string{"6 1 0 1 5 0 0 a", "t", "{}", "{}", "", "wf1:ref", `{"x":{}}`,
			"3 1 0 1 6 0 0 b", "u", "{}", "{}"},
			[]ClaimedTask{
				{Queue: "q", ID: "a", Attempt: 1, Type: "t", Payload: []byte("{}"), MaxAttempts: 1, CreatedAt: 5,
					Metadata: []byte("{}"), Workflow: "wf1", Ref: "ref", Deps: []byte(`{"x":{}}`)},
				{Queue: "q", ID: "b", Attempt: 1, Type: "u", Payload: []byte("{}"), MaxAttempts: 1, CreatedAt: 6,
					Metadata: []byte("{}")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeClaimed("q", tt.flat)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestDecodeClaimedRefusesAShortReply(t *testing.T) {
	t.Parallel()
	for _, flat := range [][]string{
		{"3 1 0 1 5 0 0 a", "t", "{}"}, // cut short
		{"3 1 0 1 5 0 0"},              // a head without its id
		{"2 1 0 1 5 0 0 a", "t", "{}"}, // fewer than type, payload, metadata
	} {
		_, err := decodeClaimed("q", flat)
		require.Error(t, err, flat)
	}
}
