package redistest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// Option adjusts what Main does around a package's tests.
type Option func(*mainOptions)

type mainOptions struct {
	after      []func()
	leak       []goleak.Option
	restricted bool
	hostNet    int // 0: no lock; 1: shared; 2: exclusive (HostNetwork)
}

// restrictShared is Restricted's choice for the process's shared server.
var restrictShared bool

// Restricted makes the clients of the shared server (Server.Client, and so
// New's) log in as an ACL user denied the commands managed Redis services
// refuse (ManagedDenied): the package's tests then show that dtq needs none
// of them. A test's own set-up uses Setup.Admin or Server.AdminClient.
func Restricted() Option {
	return func(o *mainOptions) { o.restricted = true }
}

// After runs fs, in order, once the tests have run and before the shared
// server stops and goroutines are checked: package-specific teardown such
// as closing a browser or stopping a package's own servers. They run
// whatever the tests' outcome.
func After(fs ...func()) Option {
	return func(o *mainOptions) { o.after = append(o.after, fs...) }
}

// HostNetwork holds a lock on the host's network interfaces for the whole
// run of the package's tests, across test processes (go test runs
// packages at once): exclusive for tests that change the interfaces
// (network namespaces joined by a bridge), shared for tests whose client
// aborts its requests when they change (Chromium answers
// ERR_NETWORK_CHANGED). So the two kinds never run at once; each waits
// for the other, and the wait counts toward its package's test timeout.
func HostNetwork(exclusive bool) Option {
	return func(o *mainOptions) {
		o.hostNet = 1
		if exclusive {
			o.hostNet = 2
		}
	}
}

// GoleakOptions passes opts (goleak.IgnoreTopFunction …) to the goroutine
// check. None of dtq's packages needs any today.
func GoleakOptions(opts ...goleak.Option) Option {
	return func(o *mainOptions) { o.leak = append(o.leak, opts...) }
}

// Main runs a test package's tests and returns the exit code; every
// package's TestMain calls it:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
//
// Around m.Run it does, in order:
//   - when the tests passed and New handed out prefixes on the shared server,
//     fails the run if a key is left on it outside every reserved prefix
//     (each test deletes its own keys at cleanup, so such a key was written
//     after its test ended, or outside any prefix and not reported yet);
//   - runs the After functions;
//   - stops the shared server (Shared);
//   - when the tests passed, fails the run if goroutines leaked (goleak).
//
// Problems found are written to stderr.
func Main(m *testing.M, opts ...Option) int {
	var o mainOptions
	for _, opt := range opts {
		opt(&o)
	}
	restrictShared = o.restricted
	if o.hostNet > 0 {
		release, err := lockHostNetwork(o.hostNet == 2)
		if err != nil {
			fmt.Fprintln(os.Stderr, "redistest: host network lock:", err)
			return 1
		}
		defer release()
	}
	code := m.Run()

	sharedMu.Lock()
	s := shared
	sharedMu.Unlock()
	if code == 0 && s != nil && s.prefixes.wasIssued() {
		if left, err := s.leftoverKeys(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "redistest: key leak check:", err)
			code = 1
		} else if len(left) > 0 {
			fmt.Fprintf(os.Stderr, "redistest: %d key(s) left on the shared server outside every test's prefix "+
				"(written after the test that owned the prefix ended, or under a prefix no test was given): %s\n",
				len(left), sample(left))
			code = 1
		}
	}
	for _, f := range o.after {
		f()
	}
	sharedMu.Lock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
	sharedMu.Unlock()
	if code == 0 {
		if err := goleak.Find(o.leak...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: "+err.Error())
			code = 1
		}
	}
	return code
}

var (
	shared   *Server
	sharedMu sync.Mutex
)

// Shared returns the package's shared server, starting it on first use.
// Main stops it.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		s, err := Start()
		if err != nil {
			t.Fatal(err)
		}
		if restrictShared {
			if err := s.restrict(); err != nil {
				s.Stop()
				t.Fatal(err)
			}
		}
		shared = s
	}
	return shared
}
