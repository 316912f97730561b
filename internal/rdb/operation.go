package rdb

import (
	"context"
	"time"
)

// OpClaim starts an IdempotentOperation: done (with the stored result),
// busy, or claimed for lease.
func (r *RDB) OpClaim(ctx context.Context, key, token string, lease time.Duration) (state string, result string, err error) {
	v, err := r.callOpClaim(ctx, &opClaimKeys{Operation: r.keys.Operation(key)},
		&opClaimArgs{Token: token, LeaseMS: lease.Milliseconds()})
	return v.State, v.Result, err
}

// OpFinish ends or extends an operation claim: mode done|extend|release.
func (r *RDB) OpFinish(ctx context.Context, key, token, mode string, ttl time.Duration, result []byte) (bool, error) {
	n, err := r.callOpFinish(ctx, &opFinishKeys{Operation: r.keys.Operation(key)},
		&opFinishArgs{Token: token, Mode: mode, TTLMS: ttl.Milliseconds(), Result: result})
	return n == 1, err
}
