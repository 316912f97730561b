package dtq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	p := retryPolicy{base: time.Second, max: time.Minute, jitter: 0}
	boom := errors.New("boom")
	for _, c := range []struct {
		name     string
		attempt  int
		herr     error
		panicked bool
		cause    error
		want     decision
	}{
		{name: "success", herr: nil, want: decision{op: opSucceed}},
		{name: "success after a cancel request", cause: errCancelRequested, want: decision{op: opSucceed}},
		{name: "lease lost wins over success", cause: ErrLeaseLost, want: decision{op: opNone, outcome: "lease_lost"}},
		{name: "lease lost, error", herr: boom, cause: ErrLeaseLost, want: decision{op: opNone, outcome: "lease_lost"}},
		{name: "handed back", herr: context.Canceled, cause: errShutdown, want: decision{op: opNone, outcome: "handback"}},
		{name: "retryable", attempt: 2, herr: boom,
			want: decision{op: opRetry, class: "Error", message: "boom", delay: 2 * time.Second}},
		{name: "retry after", herr: RetryAfter(7*time.Second, boom),
			want: decision{op: opRetry, class: "Error", message: "boom", delay: 7 * time.Second}},
		{name: "timeout", herr: context.DeadlineExceeded, cause: errTimeout,
			want: decision{op: opRetry, class: "Timeout", message: "context deadline exceeded", delay: time.Second}},
		{name: "cancel requested: the script decides", herr: boom, cause: errCancelRequested,
			want: decision{op: opRetry, class: "Error", message: "boom", delay: time.Second}},
		{name: "permanent", herr: Permanent(boom), want: decision{op: opDead, class: "Error", message: "boom"}},
		{name: "panic", herr: fmt.Errorf("panic: x"), panicked: true, want: decision{op: opDead, class: "Panic", message: "panic: x"}},
		{name: "exhausted", attempt: 3, herr: boom,
			want: decision{op: opDead, class: "Error", message: "boom", retryable: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ct := &rdb.ClaimedTask{Attempt: max(c.attempt, 1), MaxAttempts: 3}
			require.Equal(t, c.want, decide(ct, c.herr, c.panicked, c.cause, p, 0.5))
		})
	}
}
