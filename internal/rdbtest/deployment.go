package rdbtest

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// Open opens the deployment of rc under prefix ("": the default) with the
// settings that mods set (none: the defaults), failing t when it cannot.
func Open(t testing.TB, rc redis.UniversalClient, prefix string, mods ...func(*dtq.DeploymentConfig)) *dtq.Deployment {
	t.Helper()
	cfg := &dtq.DeploymentConfig{KeyPrefix: prefix}
	for _, mod := range mods {
		mod(cfg)
	}
	d, err := dtq.Open(rc, cfg)
	require.NoError(t, err)
	return d
}
