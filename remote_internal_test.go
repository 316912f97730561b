package dtq

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLeaseTokenRoundTrip(t *testing.T) {
	t.Parallel()
	tok := &leaseToken{ID: "t1", Queue: "img", Attempt: 3, Worker: "py-1", Priority: 7, MaxAttempts: 5}
	got, err := parseToken("t1", tok.encode())
	require.NoError(t, err)
	require.Equal(t, tok, got)

	_, err = parseToken("t2", tok.encode())
	require.ErrorIs(t, err, ErrLeaseLost, "a token of another task fences nothing")

	for name, s := range map[string]string{
		"empty":        "",
		"not base64":   "!!!",
		"not json":     "bm90IGpzb24",
		"bad queue":    (&leaseToken{ID: "t1", Queue: "Bad!", Attempt: 1, Worker: "w", MaxAttempts: 1}).encode(),
		"bad worker":   (&leaseToken{ID: "t1", Queue: "q", Attempt: 1, Worker: "a b", MaxAttempts: 1}).encode(),
		"attempt 0":    (&leaseToken{ID: "t1", Queue: "q", Attempt: 0, Worker: "w", MaxAttempts: 1}).encode(),
		"priority 10":  (&leaseToken{ID: "t1", Queue: "q", Attempt: 1, Worker: "w", MaxAttempts: 1, Priority: 10}).encode(),
		"too long":     strings.Repeat("a", 2000),
		"max attempts": (&leaseToken{ID: "t1", Queue: "q", Attempt: 1, Worker: "w"}).encode(),
	} {
		_, err := parseToken("t1", s)
		var ve *ValidationError
		require.True(t, errors.As(err, &ve), name)
		require.Equal(t, "lease_token", ve.Field, name)
	}
}

func TestClaimRequestValidate(t *testing.T) {
	t.Parallel()
	ok := ClaimRequest{WorkerID: "py-1", Queues: []string{"a", "b"}}
	require.NoError(t, ok.validate())
	require.Equal(t, 1, ok.Max)
	require.Equal(t, DefaultRemoteLease, ok.Lease)

	for _, tc := range []struct {
		field string
		edit  func(*ClaimRequest)
	}{
		{"worker_id", func(c *ClaimRequest) { c.WorkerID = "" }},
		{"worker_id", func(c *ClaimRequest) { c.WorkerID = strings.Repeat("w", 129) }},
		{"queues", func(c *ClaimRequest) { c.Queues = nil }},
		{"queues", func(c *ClaimRequest) { c.Queues = make([]string, MaxClaimQueues+1) }},
		{"queues", func(c *ClaimRequest) { c.Queues = []string{"a", "a"} }},
		{"max", func(c *ClaimRequest) { c.Max = MaxClaimTasks + 1 }},
		{"max", func(c *ClaimRequest) { c.Max = -1 }},
		{"wait", func(c *ClaimRequest) { c.Wait = MaxClaimWait + time.Millisecond }},
		{"wait", func(c *ClaimRequest) { c.Wait = -time.Second }},
		{"lease", func(c *ClaimRequest) { c.Lease = MinRemoteLease - time.Millisecond }},
		{"lease", func(c *ClaimRequest) { c.Lease = MaxRemoteLease + time.Millisecond }},
	} {
		c := ClaimRequest{WorkerID: "py-1", Queues: []string{"a"}}
		tc.edit(&c)
		err := c.validate()
		var ve *ValidationError
		require.True(t, errors.As(err, &ve), tc.field)
		require.Equal(t, tc.field, ve.Field)
	}
}
