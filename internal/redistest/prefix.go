package redistest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Setup is what a storage test needs: a client of the shared server and a
// key prefix no other test uses.
type Setup struct {
	Server *Server
	Client *redis.Client
	// Admin is a client of the server as its default user, for the test's
	// own set-up and checks (Client may be restricted: see Restricted).
	Admin  *redis.Client
	Prefix string
}

// seq numbers the prefixes New hands out: t1, t2, … unique in the process.
var seq atomic.Int64

// New returns a client of the shared server and a key prefix that no other
// test of the process uses, so tests can run in parallel on one server.
//
// At t's cleanup (after the cleanups t registered later, such as stopping
// the workers it started) New checks the shared server for stray keys and
// then deletes every key under the test's prefix. A key is stray when it
// is not under "<prefix>:" for a prefix of a test still running, nor under
// a prefix passed to Reserve. Other tests' keys are never stray while they
// run, so the check holds with tests running in parallel; a stray key is
// written by this test or one running alongside it, and fails this test
// with its name. Each stray key is reported once.
func New(t testing.TB) *Setup {
	t.Helper()
	return newSetup(t, Shared(t))
}

func newSetup(t testing.TB, s *Server) *Setup {
	t.Helper()
	c := s.Client(t)
	admin := c
	if s.user != "" {
		admin = s.AdminClient(t)
	}
	prefix := fmt.Sprintf("t%d", seq.Add(1))
	s.prefixes.issue(prefix)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stray, err := s.strayKeys(ctx, admin)
		if err != nil {
			t.Errorf("redistest: key leak check: %v", err)
		} else if len(stray) > 0 {
			t.Errorf("redistest: %d key(s) outside any running test's prefix on the shared server, written by %s "+
				"or a test running alongside it (use Setup.Prefix, or redistest.Reserve for a fixed prefix): %s",
				len(stray), t.Name(), sample(stray))
		}
		// The keys go before the prefix retires: a key of a retired
		// prefix that still exists was written after its test ended.
		if err := deleteUnder(ctx, admin, prefix); err != nil {
			t.Errorf("redistest: delete the keys of %s: %v", prefix, err)
		}
		s.prefixes.retire(prefix)
	})
	return &Setup{Server: s, Client: c, Admin: admin, Prefix: prefix}
}

var reserved = struct {
	sync.Mutex
	prefixes []string
}{}

// Reserve declares prefixes that tests of the package write under on the
// shared server without taking them from New (a fixed DTQ_KEY_PREFIX, a
// key name a test spells itself): the leak checks accept every key under
// "<prefix>:". Call it from TestMain, before the tests run, or at the start
// of the test that uses the prefix. A reservation lasts for the process.
// Safe for concurrent use.
func Reserve(prefixes ...string) {
	reserved.Lock()
	defer reserved.Unlock()
	reserved.prefixes = append(reserved.prefixes, prefixes...)
}

func isReserved(key string) bool {
	reserved.Lock()
	defer reserved.Unlock()
	return slices.ContainsFunc(reserved.prefixes, func(p string) bool { return under(key, p) })
}

// under reports whether key belongs to prefix: dtq's keys are
// "<prefix>:<kind>…".
func under(key, prefix string) bool {
	return strings.HasPrefix(key, prefix+":")
}

// prefixOf returns the prefix part of a dtq key ("" when key has no ':').
func prefixOf(key string) string {
	p, _, found := strings.Cut(key, ":")
	if !found {
		return ""
	}
	return p
}

// prefixRegistry tracks the prefixes New handed out on one server.
type prefixRegistry struct {
	mu       sync.Mutex
	issued   bool
	live     map[string]bool // prefixes of tests still running
	reported map[string]bool // stray keys already reported
}

func (r *prefixRegistry) issue(prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live == nil {
		r.live = map[string]bool{}
	}
	r.issued = true
	r.live[prefix] = true
}

func (r *prefixRegistry) retire(prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, prefix)
}

func (r *prefixRegistry) wasIssued() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.issued
}

// unowned returns the keys that belong to no live or reserved prefix and
// were not reported before.
func (r *prefixRegistry) unowned(keys []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, k := range keys {
		if !r.live[prefixOf(k)] && !r.reported[k] && !isReserved(k) {
			out = append(out, k)
		}
	}
	return out
}

func (r *prefixRegistry) markReported(keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported == nil {
		r.reported = map[string]bool{}
	}
	for _, k := range keys {
		r.reported[k] = true
	}
}

// strayKeys returns the keys of s's database 0 that belong to no running
// test's prefix and no reserved prefix and were not reported yet, and marks
// them reported. Keys are read first and judged after: a test registers
// its prefix before it writes, so a key seen in the scan belongs to a
// prefix issued by then. A test that ended between the scan and the
// judgement deleted its keys before retiring its prefix, so a key judged
// stray is checked once more to still exist.
func (s *Server) strayKeys(ctx context.Context, c *redis.Client) ([]string, error) {
	all, err := Keys(ctx, c, "")
	if err != nil {
		return nil, err
	}
	candidates := s.prefixes.unowned(all)
	if len(candidates) == 0 {
		return nil, nil
	}
	pipe := c.Pipeline()
	exists := make([]*redis.IntCmd, len(candidates))
	for i, k := range candidates {
		exists[i] = pipe.Exists(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var stray []string
	for i, k := range candidates {
		if exists[i].Val() == 1 {
			stray = append(stray, k)
		}
	}
	slices.Sort(stray)
	s.prefixes.markReported(stray)
	return stray, nil
}

// leftoverKeys returns the keys of s's database 0, once every test has
// ended, that no reserved prefix covers and no check reported yet.
func (s *Server) leftoverKeys(ctx context.Context) ([]string, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	return s.strayKeys(ctx, c)
}

// deleteUnder deletes every key under "<prefix>:".
func deleteUnder(ctx context.Context, c *redis.Client, prefix string) error {
	keys, err := Keys(ctx, c, prefix)
	if err != nil {
		return err
	}
	for batch := range slices.Chunk(keys, 500) {
		if err := c.Unlink(ctx, batch...).Err(); err != nil {
			return err
		}
	}
	return nil
}

// sample lists up to ten keys for a message.
func sample(keys []string) string {
	if len(keys) > 10 {
		return strings.Join(keys[:10], ", ") + fmt.Sprintf(" … (%d more)", len(keys)-10)
	}
	return strings.Join(keys, ", ")
}

// Keys returns every key under prefix (SCAN, for assertions in tests);
// prefix "" returns every key of the database.
func Keys(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	match := "*"
	if prefix != "" {
		match = prefix + ":*"
	}
	var out []string
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		out = append(out, iter.Val())
	}
	return out, iter.Err()
}
