package cursor

import (
	"os"
	"testing"

	"github.com/dtq-io/dtq/internal/redistest"
)

// No Redis here: Main only checks for leaked goroutines.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
