package dtq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dtq-io/dtq/internal/rdb"
)

type prefixKey struct{}

// withWorkerPrefix records the worker's key prefix in a handler's context so
// IdempotentOperation keys land under it.
func withWorkerPrefix(ctx context.Context, prefix string) context.Context {
	return context.WithValue(ctx, prefixKey{}, prefix)
}

// operationLease is how long an IdempotentOperation claim lives while fn
// runs; it is renewed every third of that, so a crashed caller blocks the
// key for at most this long.
const operationLease = 30 * time.Second

// IdempotentOperation runs fn successfully at most once per key within ttl,
// across every process sharing Redis. The first caller runs fn; once fn
// succeeds its result is stored for ttl and later callers get
// executed=false with that result. A caller arriving while fn runs elsewhere
// gets ErrOperationInProgress (try again later, e.g. by returning the error
// from a handler so the task is retried).
//
// While fn runs the claim is a short lease (30s, renewed), so a crash frees
// the key quickly; if fn fails the claim is released so a retry can run it
// again. If the claim is lost while fn runs (renewals failed past the lease
// and another caller took the key), fn's context is cancelled with cause
// ErrOperationLost. Storing the result is retried through transient Redis
// errors for up to the lease. fn may have partly acted before failing: make its side effects safe
// to repeat, or check for them, when that matters. Results must marshal to
// JSON. Keys live in d's Redis at <prefix>:op:<key>, where the prefix is
// the worker's KeyPrefix inside a dtq handler and d's elsewhere.
func IdempotentOperation[T any](ctx context.Context, d *Deployment, key string, ttl time.Duration, fn func(ctx context.Context) (T, error)) (executed bool, result T, err error) {
	if d == nil || key == "" || ttl <= 0 {
		return false, result, errors.New("dtq: IdempotentOperation needs a Deployment, a key and a positive ttl")
	}
	prefix, _ := ctx.Value(prefixKey{}).(string)
	if prefix == "" {
		prefix = d.dep.keyPrefix
	}
	r := rdb.New(d.redis, prefix)
	var b [12]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	lease := min(operationLease, ttl)

	state, stored, err := r.OpClaim(ctx, key, token, lease)
	if err != nil {
		return false, result, fmt.Errorf("dtq: claim operation %q: %w", key, err)
	}
	switch state {
	case "done":
		if stored != "" {
			if err := json.Unmarshal([]byte(stored), &result); err != nil {
				return false, result, fmt.Errorf("dtq: decode stored result of %q: %w", key, err)
			}
		}
		return false, result, nil
	case "busy":
		return false, result, ErrOperationInProgress
	}

	// Keep the lease alive while fn runs and while its result is stored;
	// stop renewing however fn ends. A renewal that finds the claim gone (it
	// lapsed and another caller took the key) cancels fn's context with
	// ErrOperationLost: fn should stop, since another run may be under way.
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				ours, err := r.OpFinish(context.WithoutCancel(ctx), key, token, "extend", lease, nil)
				if err == nil && !ours {
					cancel(ErrOperationLost)
					return
				}
			}
		}
	}()
	bg := context.WithoutCancel(ctx)
	finished := false
	defer func() {
		close(stop)
		<-renewed
		if !finished {
			// fn panicked: free the key for a retry, then let the panic go on.
			_, _ = r.OpFinish(bg, key, token, "release", 0, nil)
		}
	}()
	result, err = fn(fctx)
	finished = true

	if err != nil {
		_, _ = r.OpFinish(bg, key, token, "release", 0, nil)
		return true, result, err
	}
	body, merr := json.Marshal(result)
	if merr != nil {
		_, _ = r.OpFinish(bg, key, token, "release", 0, nil)
		return true, result, fmt.Errorf("dtq: encode result of %q: %w", key, merr)
	}
	ours, err := storeResult(bg, r, key, token, ttl, body, lease)
	if err != nil {
		return true, result, fmt.Errorf("dtq: store result of %q: %w", key, err)
	}
	if !ours {
		// Our lease ran out while fn ran and another caller may have taken
		// the key: fn did run, but its result could not be recorded.
		return true, result, fmt.Errorf("%w: %q outlived its lease; result not stored", ErrOperationLost, key)
	}
	return true, result, nil
}

// storeResult records fn's success. A transient error is retried (the
// claim stays renewed meanwhile) for up to window: giving up would let a
// redelivery run fn again although it succeeded.
func storeResult(ctx context.Context, r *rdb.RDB, key, token string, ttl time.Duration, body []byte, window time.Duration) (bool, error) {
	deadline := time.Now().Add(window)
	delay := 50 * time.Millisecond
	for {
		ours, err := r.OpFinish(ctx, key, token, "done", ttl, body)
		if err == nil || time.Now().Add(delay).After(deadline) {
			return ours, err
		}
		time.Sleep(delay) // bounded by window; ctx is the caller's, uncancellable here
		delay = min(delay*2, 2*time.Second)
	}
}
