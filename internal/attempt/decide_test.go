package attempt

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	p := Policy{Base: time.Second, Max: time.Minute}
	failed := func(e End) *End { e.Failed, e.Class, e.Message = true, "Error", "boom"; return &e }
	for _, c := range []struct {
		name string
		end  *End
		want Decision
	}{
		{"success", &End{Attempt: 1, MaxAttempts: 3}, Decision{Op: Succeed}},
		{"success at shutdown", &End{Attempt: 1, Shutdown: true}, Decision{Op: Succeed}},
		{"lease lost wins over success", &End{LeaseLost: true}, Decision{Op: None, Outcome: "lease_lost"}},
		{"lease lost wins over a failure", failed(End{LeaseLost: true, Permanent: true}), Decision{Op: None, Outcome: "lease_lost"}},
		{"handed back", failed(End{Shutdown: true, Panicked: true}), Decision{Op: None, Outcome: "handback"}},
		{"first retry is the base", failed(End{Attempt: 1, MaxAttempts: 3}),
			Decision{Op: Retry, Class: "Error", Message: "boom", Delay: time.Second}},
		{"backoff doubles", failed(End{Attempt: 2, MaxAttempts: 3}),
			Decision{Op: Retry, Class: "Error", Message: "boom", Delay: 2 * time.Second}},
		{"retry after replaces the backoff", failed(End{Attempt: 2, MaxAttempts: 3, RetryAfter: 7 * time.Second, HasRetryAfter: true}),
			Decision{Op: Retry, Class: "Error", Message: "boom", Delay: 7 * time.Second}},
		{"retry after zero is at once", failed(End{Attempt: 2, MaxAttempts: 3, HasRetryAfter: true}),
			Decision{Op: Retry, Class: "Error", Message: "boom"}},
		{"negative retry after is at once", failed(End{Attempt: 1, MaxAttempts: 3, RetryAfter: -time.Second, HasRetryAfter: true}),
			Decision{Op: Retry, Class: "Error", Message: "boom"}},
		{"timeout names the class", failed(End{Attempt: 1, MaxAttempts: 3, TimedOut: true}),
			Decision{Op: Retry, Class: "Timeout", Message: "boom", Delay: time.Second}},
		{"permanent", failed(End{Attempt: 1, MaxAttempts: 3, Permanent: true}),
			Decision{Op: Dead, Class: "Error", Message: "boom"}},
		{"permanent timeout", failed(End{Attempt: 1, MaxAttempts: 3, Permanent: true, TimedOut: true}),
			Decision{Op: Dead, Class: "Timeout", Message: "boom"}},
		{"panic is permanent", failed(End{Attempt: 1, MaxAttempts: 3, Panicked: true, TimedOut: true}),
			Decision{Op: Dead, Class: "Panic", Message: "boom"}},
		{"exhausted", failed(End{Attempt: 3, MaxAttempts: 3}),
			Decision{Op: Dead, Class: "Error", Message: "boom", Retryable: true}},
		{"max attempts unknown: the script checks", failed(End{Attempt: 9}),
			Decision{Op: Retry, Class: "Error", Message: "boom", Delay: time.Minute}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, Decide(c.end, p, 0.5))
		})
	}
}

func TestExhausted(t *testing.T) {
	t.Parallel()
	d := Decision{Op: Retry, Class: "Quota", Message: "over", Delay: time.Second}
	require.Equal(t, Decision{Op: Dead, Class: "Quota", Message: "over", Retryable: true}, d.Exhausted())
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		op   Op
		err  error
		dlq  bool
		want string
	}{
		{"succeeded", Succeed, nil, true, "succeeded"},
		{"retrying", Retry, nil, true, "retrying"},
		{"dead-lettered", Dead, nil, true, "dead_lettered"},
		{"failed with the DLQ off", Dead, nil, false, "failed"},
		{"lease lost", Succeed, fmt.Errorf("finish: %w", rdb.ErrLeaseLost), true, "lease_lost"},
		{"cancel won", Retry, rdb.ErrCancelWon, true, "cancelled"},
		{"write failed", Dead, errors.New("down"), true, "error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, Outcome(&Decision{Op: c.op}, c.err, c.dlq))
		})
	}
}

func TestSuccess(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		body []byte
		max  int
		want rdb.Success
	}{
		{"no result", nil, 8, rdb.Success{ID: "t", Attempt: 2}},
		{"under the cap", []byte(`{"a":1}`), 8, rdb.Success{ID: "t", Attempt: 2, Result: []byte(`{"a":1}`)}},
		{"at the cap", []byte(`"abcdef"`), 8, rdb.Success{ID: "t", Attempt: 2, Result: []byte(`"abcdef"`)}},
		{"over the cap is dropped", []byte(`"abcdefg"`), 8, rdb.Success{ID: "t", Attempt: 2, Truncated: true}},
		{"a negative cap drops every result", []byte(`1`), -1, rdb.Success{ID: "t", Attempt: 2, Truncated: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, Success("t", 2, c.body, c.max))
		})
	}
}

func TestResultJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		res     any
		want    string
		wantErr bool
	}{
		{"nil", nil, "", false},
		{"value", map[string]int{"a": 1}, `{"a":1}`, false},
		{"raw message", json.RawMessage(`[1,2]`), `[1,2]`, false},
		{"bytes", []byte(`"x"`), `"x"`, false},
		{"invalid raw message", json.RawMessage(`{`), "", true},
		{"invalid bytes", []byte(`nope`), "", true},
		{"not encodable", func() {}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := ResultJSON(c.res)
			if c.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, string(got))
		})
	}
}
