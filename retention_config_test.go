package dtq_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// TestRetentionSettingsAreChecked: a retention is NoRetention, zero (the
// default) or 1s..366 days.
func TestRetentionSettingsAreChecked(t *testing.T) {
	t.Parallel()
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // Open does no I/O
	t.Cleanup(func() { _ = rc.Close() })
	for _, tt := range []struct {
		d  time.Duration
		ok bool
	}{
		{0, true}, {dtq.NoRetention, true}, {time.Hour, true}, {dtq.MaxRetention, true},
		{-5 * time.Second, false}, {dtq.MaxRetention + time.Second, false},
	} {
		_, err := dtq.Open(rc, &dtq.DeploymentConfig{SucceededRetention: tt.d})
		require.Equal(t, tt.ok, err == nil, "succeeded retention %v: %v", tt.d, err)
		_, err = dtq.Open(rc, &dtq.DeploymentConfig{FailedRetention: tt.d})
		require.Equal(t, tt.ok, err == nil, "failed retention %v: %v", tt.d, err)
	}
}
