package faultsuite

import "github.com/dtq-io/dtq/internal/rdbtest"

// openDeployment opens the deployment of rc under prefix with the default
// settings.
var openDeployment = rdbtest.Open
