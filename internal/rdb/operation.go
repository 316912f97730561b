package rdb

import (
	"context"
	"time"
)

// OpClaim starts an IdempotentOperation: done (with the stored result),
// busy, or claimed for lease.
func (r *RDB) OpClaim(ctx context.Context, key, token string, lease time.Duration) (state string, result string, err error) {
	v, err := r.run(ctx, scriptOpClaim, []string{r.keys.Operation(key)}, token, lease.Milliseconds()).Slice()
	if err != nil {
		return "", "", err
	}
	state, _ = v[0].(string)
	if len(v) > 1 {
		result, _ = v[1].(string)
	}
	return state, result, nil
}

// OpFinish ends or extends an operation claim: mode done|extend|release.
func (r *RDB) OpFinish(ctx context.Context, key, token, mode string, ttl time.Duration, result []byte) (bool, error) {
	n, err := r.run(ctx, scriptOpFinish, []string{r.keys.Operation(key)}, token, mode, ttl.Milliseconds(), result).Int64()
	return n == 1, err
}
