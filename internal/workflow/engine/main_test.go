package engine_test

import (
	"os"
	"testing"

	"github.com/dtq-io/dtq/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
