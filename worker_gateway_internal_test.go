package dtq

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
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
	require.Equal(t, tok.ID, got.ID)
	require.Equal(t, tok.Queue, got.Queue)
	require.Equal(t, tok.Attempt, got.Attempt)
	require.Equal(t, tok.Worker, got.Worker)
	require.Equal(t, tok.Claim, got.Claim)
	require.NoError(t, got.verify("t1", secret))
	require.ErrorIs(t, got.verify("t2", secret), ErrLeaseLost, "a token of another task fences nothing")
	require.ErrorIs(t, got.verify("t1", []byte(strings.Repeat("j", MinLeaseSecretLen))), ErrLeaseLost,
		"a token issued under another secret")

	// Whatever decodes but was not issued as it is under this secret is a
	// lost lease: the MAC covers every byte of the body.
	body, mac, _ := strings.Cut(s, ".")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	reencode := func(edit func(map[string]any)) string {
		f := maps.Clone(fields)
		edit(f)
		b, err := json.Marshal(f)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for name, forged := range map[string]string{
		"queue":            reencode(func(f map[string]any) { f["q"] = "img2" }) + "." + mac,
		"attempt":          reencode(func(f map[string]any) { f["a"] = 4 }) + "." + mac,
		"worker":           reencode(func(f map[string]any) { f["w"] = "py-2" }) + "." + mac,
		"claim":            reencode(func(f map[string]any) { f["n"] = "0a1b2c3e" }) + "." + mac,
		"a field added":    reencode(func(f map[string]any) { f["m"] = 99 }) + "." + mac,
		"no MAC":           body,
		"empty MAC":        body + ".",
		"MAC not base64":   body + ".!!",
		"MAC of another":   body + "." + strings.Split(tok.encode([]byte(strings.Repeat("j", 32))), ".")[1],
		"flipped MAC byte": body + "." + flip(t, mac),
		"no claim":         (&leaseToken{ID: "t1", Queue: "img", Attempt: 3, Worker: "py-1"}).encode(secret),
		"old layout": reencode(func(f map[string]any) {
			delete(f, "n")
			f["p"], f["m"] = 0, 99
		}),
	} {
		p, err := parseToken(forged)
		require.NoError(t, err, name)
		require.ErrorIs(t, p.verify("t1", secret), ErrLeaseLost, name)
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

// flip changes one byte of a base64url MAC.
func flip(t *testing.T, mac string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(mac)
	require.NoError(t, err)
	b[0] ^= 1
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

func TestNewWorkerGatewayRefusesAShortLeaseSecret(t *testing.T) {
	t.Parallel()
	d, err := Open(unreachable(t), nil)
	require.NoError(t, err)
	_, err = d.NewWorkerGateway(&WorkerGatewayConfig{LeaseSecret: strings.Repeat("s", MinLeaseSecretLen-1)})
	require.ErrorContains(t, err, "LeaseSecret must be at least 32 bytes")
	_, err = d.NewWorkerGateway(&WorkerGatewayConfig{LeaseSecret: strings.Repeat("s", MinLeaseSecretLen)})
	require.NoError(t, err)
}
