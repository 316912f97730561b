package clustersuite_test

import (
	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/rdbtest"
)

// openDeployment opens the deployment of rc under prefix with the settings
// that mods set.
var openDeployment = rdbtest.Open

// replicaAcks sets ReplicaAcks to n.
func replicaAcks(n int) func(*dtq.DeploymentConfig) {
	return func(c *dtq.DeploymentConfig) { c.ReplicaAcks = n }
}
