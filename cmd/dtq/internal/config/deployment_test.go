package config_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// openDeployment opens the deployment of rc under prefix ("": the
// default), with the default settings.
func openDeployment(t testing.TB, rc redis.UniversalClient, prefix string) *dtq.Deployment {
	t.Helper()
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: prefix})
	require.NoError(t, err)
	return d
}
