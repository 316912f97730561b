package rdbtest

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// Open opens the deployment of rc under prefix ("": the default) with the
// default settings, failing t when it cannot.
func Open(t testing.TB, rc redis.UniversalClient, prefix string) *dtq.Deployment {
	t.Helper()
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: prefix})
	require.NoError(t, err)
	return d
}
