package clustersuite_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// openDeployment opens the deployment of rc under prefix ("": the
// default), with the settings that mods set.
func openDeployment(t testing.TB, rc redis.UniversalClient, prefix string, mods ...func(*dtq.DeploymentConfig)) *dtq.Deployment {
	t.Helper()
	cfg := &dtq.DeploymentConfig{KeyPrefix: prefix}
	for _, mod := range mods {
		mod(cfg)
	}
	d, err := dtq.Open(rc, cfg)
	require.NoError(t, err)
	return d
}

// replicaAcks sets ReplicaAcks to n.
func replicaAcks(n int) func(*dtq.DeploymentConfig) {
	return func(c *dtq.DeploymentConfig) { c.ReplicaAcks = n }
}
