package dtqprom_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/dtq-io/dtq/internal/redistest"
)

func TestMain(m *testing.M) {
	code := redistest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
