package dtq_test

import (
	"os"
	"testing"

	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(runChildWorker(mode))
	}
	if os.Getenv(childSignalEnv) != "" {
		os.Exit(runChildSignalWorker())
	}
	if os.Getenv(childSchedulerEnv) != "" {
		os.Exit(runChildScheduler())
	}
	rdb.StrictScripts() // docs/compatibility.md, "Strict scripts"
	os.Exit(redistest.Main(m, redistest.Restricted()))
}
