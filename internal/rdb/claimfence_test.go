package rdb

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// TestClaimNonceFencesRenewAndFinalize: settings that name a claim nonce
// (a remote worker's) renew and finalize only the attempt that claim
// started; with another nonce nothing is written.
func TestClaimNonceFencesRenewAndFinalize(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	for _, q := range []string{"renew", "succ", "retry", "dead"} {
		ct := b.claimOne(t, q, nil) // claimed with nonce c1
		before := b.c.HGetAll(b.ctx, b.keys.Task(q, ct.ID)).Val()
		lease := b.c.ZScore(b.ctx, b.keys.Lease(q), ct.ID).Val()
		wrong, right := *testSettings, *testSettings
		wrong.Claim, right.Claim = "c2", "c1"
		call := func(s *WorkerSettings) error {
			switch q {
			case "renew":
				st, err := b.r.RenewLeases(b.ctx, q, s, b.now.Add(time.Second), []LeaseRef{{ID: ct.ID, Attempt: ct.Attempt}})
				require.NoError(t, err)
				if st[0] == LeaseLost {
					return ErrLeaseLost
				}
				return nil
			case "succ":
				errs, err := b.r.FinishSucceeded(b.ctx, q, s, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
				require.NoError(t, err)
				return errs[0]
			case "retry":
				return b.r.FinishRetry(b.ctx, finishArgsOf(ct, b.now), s, time.Minute, "Boom", "again")
			}
			return b.r.FinishDead(b.ctx, finishArgsOf(ct, b.now), s, "Boom", "no", false)
		}
		require.ErrorIs(t, call(&wrong), ErrLeaseLost, q)
		require.Equal(t, before, b.c.HGetAll(b.ctx, b.keys.Task(q, ct.ID)).Val(), q)
		require.Equal(t, lease, b.c.ZScore(b.ctx, b.keys.Lease(q), ct.ID).Val(), q)
		require.NoError(t, call(&right), q)
		require.NoError(t, call(&right), "%s sent again", q)
	}
}

// TestFailAcksTheTasksOwnBand: the retry and dead scripts ack the entry in
// the band the task hash records, whatever band the caller names, so no
// entry stays pending.
func TestFailAcksTheTasksOwnBand(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	for _, q := range []string{"retry", "dead"} {
		ct := b.claimOne(t, q, func(nt *NewTask) { nt.Priority = 7 })
		require.Equal(t, 7, ct.Priority)
		pending := func() int64 {
			p, err := b.c.XPending(b.ctx, b.keys.Stream(q, 7), Group).Result()
			require.NoError(t, err)
			return p.Count
		}
		require.EqualValues(t, 1, pending())
		a := finishArgsOf(ct, b.now)
		a.Priority = 0 // a caller that does not know the band
		if q == "retry" {
			require.NoError(t, b.r.FinishRetry(b.ctx, a, testSettings, time.Minute, "Boom", "again"))
		} else {
			require.NoError(t, b.r.FinishDead(b.ctx, a, testSettings, "Boom", "no", false))
		}
		require.Zero(t, pending(), q)
	}
}

// TestRetryChecksAttemptsWhenAsked: with CheckAttempts, a retry of a task
// with no attempts left writes nothing and answers ErrAttemptsExhausted,
// also when sent again after the dead-letter that followed; the dead-letter
// itself answers as the first time.
func TestRetryChecksAttemptsWhenAsked(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "q", func(nt *NewTask) { nt.MaxAttempts = 1 })
	a := finishArgsOf(ct, b.now)
	a.CheckAttempts = true
	before := b.c.HGetAll(b.ctx, b.keys.Task("q", ct.ID)).Val()
	require.ErrorIs(t, b.r.FinishRetry(b.ctx, a, testSettings, time.Minute, "Boom", "again"), ErrAttemptsExhausted)
	require.Equal(t, before, b.c.HGetAll(b.ctx, b.keys.Task("q", ct.ID)).Val())
	for range 2 {
		require.NoError(t, b.r.FinishDead(b.ctx, a, testSettings, "Boom", "again", true))
		require.Equal(t, dtqtype.StatusDeadLettered, b.get(t, ct.ID).Status)
		require.ErrorIs(t, b.r.FinishRetry(b.ctx, a, testSettings, time.Minute, "Boom", "again"), ErrAttemptsExhausted)
	}
	// Without CheckAttempts the retry is a Go worker's: it knows the limit.
	a.CheckAttempts = false
	require.ErrorIs(t, b.r.FinishRetry(b.ctx, a, testSettings, time.Minute, "Boom", "again"), ErrLeaseLost)

	ct = b.claimOne(t, "left", func(nt *NewTask) { nt.MaxAttempts = 2 })
	a = finishArgsOf(ct, b.now)
	a.CheckAttempts = true
	require.NoError(t, b.r.FinishRetry(b.ctx, a, testSettings, time.Minute, "Boom", "again"))
	require.Equal(t, dtqtype.StatusRetrying, b.get(t, ct.ID).Status)
}

func TestLeaseSecretIsStoredOnce(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	got, err := b.r.LeaseSecret(b.ctx, "first")
	require.NoError(t, err)
	require.Equal(t, "first", got)
	got, err = b.r.LeaseSecret(b.ctx, "second")
	require.NoError(t, err)
	require.Equal(t, "first", got, "every process gets the secret stored first")
}
