package dtq_test

import (
	"os"
	"testing"

	"github.com/dtq-io/dtq/internal/redistest"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(runChildWorker(mode))
	}
	if os.Getenv(childSchedulerEnv) != "" {
		os.Exit(runChildScheduler())
	}
	os.Exit(redistest.Main(m))
}
