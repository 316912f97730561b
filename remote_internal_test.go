package dtq

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLeaseTokenRoundTrip(t *testing.T) {
	t.Parallel()
	secret := []byte(strings.Repeat("k", MinLeaseSecretLen))
	tok := &leaseToken{ID: "t1", Queue: "img", Attempt: 3, Worker: "py-1", Claim: "0a1b2c3d"}
	s := tok.encode(secret)
	got, err := parseToken(s)
	require.NoError(t, err)
	require.Equal(t, tok, got)
	require.NoError(t, got.verify("t1", secret))
	require.ErrorIs(t, got.verify("t2", secret), ErrLeaseLost, "a token of another task fences nothing")

	// Whatever decodes but was not issued as it is under this secret is a
	// lost lease: every field is covered by the MAC.
	other := *tok
	other.MAC = tok.mac([]byte(strings.Repeat("j", MinLeaseSecretLen)))
	forgeries := map[string]leaseToken{"issued under another secret": other}
	for name, edit := range map[string]func(*leaseToken){
		"queue":         func(t *leaseToken) { t.Queue = "img2" },
		"task":          func(t *leaseToken) { t.ID = "t9" },
		"attempt":       func(t *leaseToken) { t.Attempt = 4 },
		"worker":        func(t *leaseToken) { t.Worker = "py-2" },
		"claim":         func(t *leaseToken) { t.Claim = "0a1b2c3e" },
		"no claim":      func(t *leaseToken) { t.Claim = "" },
		"claim not hex": func(t *leaseToken) { t.Claim = "nonce\x00" },
		"no MAC":        func(t *leaseToken) { t.MAC = nil },
	} {
		f := *tok // the genuine token's MAC on altered fields
		edit(&f)
		forgeries[name] = f
	}
	for name, f := range forgeries {
		p, err := parseToken(f.encodeRaw())
		require.NoError(t, err, name)
		require.ErrorIs(t, p.verify(f.ID, secret), ErrLeaseLost, name)
	}

	for name, s := range map[string]string{
		"empty":      "",
		"not base64": "!!!",
		"not json":   "bm90IGpzb24",
		"bad queue":  (&leaseToken{ID: "t1", Queue: "Bad!", Attempt: 1, Worker: "w", Claim: "aa"}).encode(secret),
		"bad worker": (&leaseToken{ID: "t1", Queue: "q", Attempt: 1, Worker: "a b", Claim: "aa"}).encode(secret),
		"attempt 0":  (&leaseToken{ID: "t1", Queue: "q", Attempt: 0, Worker: "w", Claim: "aa"}).encode(secret),
		"no task":    (&leaseToken{Queue: "q", Attempt: 1, Worker: "w", Claim: "aa"}).encode(secret),
		"too long":   strings.Repeat("a", 2000),
	} {
		_, err := parseToken(s)
		var ve *ValidationError
		require.True(t, errors.As(err, &ve), name)
		require.Equal(t, "lease_token", ve.Field, name)
	}
}

// encodeRaw encodes t as it is, MAC included, the way a forger would.
func (t *leaseToken) encodeRaw() string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
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
