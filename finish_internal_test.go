package dtq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/attempt"
	"github.com/dtq-io/dtq/internal/rdb"
)

// TestAttemptEnd checks how a Go handler's error and its context's cause
// map onto an attempt's end, through the decision it leads to.
func TestAttemptEnd(t *testing.T) {
	t.Parallel()
	p := attempt.Policy{Base: time.Second, Max: time.Minute}
	boom := errors.New("boom")
	for _, c := range []struct {
		name     string
		attempt  int
		herr     error
		panicked bool
		cause    error
		want     attempt.Decision
	}{
		{name: "success", herr: nil, want: attempt.Decision{Op: attempt.Succeed}},
		{name: "success after a cancel request", cause: errCancelRequested, want: attempt.Decision{Op: attempt.Succeed}},
		{name: "lease lost wins over success", cause: ErrLeaseLost, want: attempt.Decision{Op: attempt.None, Outcome: "lease_lost"}},
		{name: "lease lost, error", herr: boom, cause: ErrLeaseLost, want: attempt.Decision{Op: attempt.None, Outcome: "lease_lost"}},
		{name: "handed back", herr: context.Canceled, cause: errShutdown, want: attempt.Decision{Op: attempt.None, Outcome: "handback"}},
		{name: "retryable", attempt: 2, herr: boom,
			want: attempt.Decision{Op: attempt.Retry, Class: "Error", Message: "boom", Delay: 2 * time.Second}},
		{name: "retry after", herr: RetryAfter(7*time.Second, boom),
			want: attempt.Decision{Op: attempt.Retry, Class: "Error", Message: "boom", Delay: 7 * time.Second}},
		{name: "timeout", herr: context.DeadlineExceeded, cause: errTimeout,
			want: attempt.Decision{Op: attempt.Retry, Class: "Timeout", Message: "context deadline exceeded", Delay: time.Second}},
		{name: "cancel requested: the script decides", herr: boom, cause: errCancelRequested,
			want: attempt.Decision{Op: attempt.Retry, Class: "Error", Message: "boom", Delay: time.Second}},
		{name: "permanent", herr: Permanent(boom), want: attempt.Decision{Op: attempt.Dead, Class: "Error", Message: "boom"}},
		{name: "panic", herr: fmt.Errorf("panic: x"), panicked: true, want: attempt.Decision{Op: attempt.Dead, Class: "Panic", Message: "panic: x"}},
		{name: "exhausted", attempt: 3, herr: boom,
			want: attempt.Decision{Op: attempt.Dead, Class: "Error", Message: "boom", Retryable: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ct := &rdb.ClaimedTask{Attempt: max(c.attempt, 1), MaxAttempts: 3}
			require.Equal(t, c.want, attempt.Decide(attemptEnd(ct, c.herr, c.panicked, c.cause), p, 0.5))
		})
	}
}
