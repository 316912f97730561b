package rdb

import (
	"os"
	"testing"

	"github.com/dtq-io/dtq/internal/redistest"
)

// TestMain runs the package's tests with the redis-server redistest starts.
// The scripts' KEYS, ARGV and replies are checked by compilation: every
// call goes through scripts_gen.go, which scriptgen writes from the
// scripts' headers (internal/scriptgen's tests keep it up to date).
//
// Every script runs in the strict-scripts mode (StrictScripts): a key
// that is neither in its KEYS nor carries a declared hash tag fails it, as
// does a command of more than 3,999 arguments.
func TestMain(m *testing.M) {
	StrictScripts()
	os.Exit(redistest.Main(m, redistest.Restricted()))
}
