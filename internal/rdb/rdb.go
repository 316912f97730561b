// Package rdb owns dtq's Redis state: every key name and every state change.
// Every state change is one Lua script from lua/, run with EVALSHA (falling
// back to EVAL); Go code here only builds keys and arguments and decodes
// replies. The one other reader is the event feed (internal/events), which
// reads the event streams with XREAD and writes nothing.
package rdb

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

var scripts = loadScripts()

func loadScripts() map[string]*redis.Script {
	entries, err := luaFS.ReadDir("lua")
	if err != nil {
		panic(err)
	}
	lib, err := luaFS.ReadFile("lua/_lib.lua")
	if err != nil {
		panic(err)
	}
	helpers := splitLib(string(lib))
	m := make(map[string]*redis.Script, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "_") {
			continue // shared helpers, prepended to the scripts that use them
		}
		src, err := luaFS.ReadFile("lua/" + e.Name())
		if err != nil {
			panic(err)
		}
		m[strings.TrimSuffix(e.Name(), ".lua")] = redis.NewScript(withHelpers(helpers, string(src)))
	}
	return m
}

// libBlock is one top-level declaration of _lib.lua (a helper function or a
// shared table) with the comment above it.
type libBlock struct {
	name string
	text string
}

// splitLib cuts _lib.lua into its top-level declarations ("local function
// x" or "local x ="), each with the comment lines right above it, in order.
// The file's own header comment is dropped.
func splitLib(lib string) []libBlock {
	lines := strings.Split(lib, "\n")
	var starts []int
	var names []string
	for i, line := range lines {
		if !strings.HasPrefix(line, "local ") {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(line, "local "), "function ")
		if end := strings.IndexFunc(name, func(r rune) bool { return !isLuaIdent(r) }); end >= 0 {
			name = name[:end]
		}
		start := i
		for start > 0 && strings.HasPrefix(lines[start-1], "--") {
			start--
		}
		starts, names = append(starts, start), append(names, name)
	}
	blocks := make([]libBlock, len(starts))
	for k, start := range starts {
		end := len(lines)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		blocks[k] = libBlock{name: names[k], text: strings.Join(lines[start:end], "\n") + "\n"}
	}
	return blocks
}

// withHelpers prepends to src the helpers it uses, and the helpers those
// use, in _lib.lua's order. Every call of a script runs its prelude (each
// helper is a closure or table created anew), so carrying all of _lib.lua
// would cost every call several microseconds of Redis time.
func withHelpers(helpers []libBlock, src string) string {
	need := map[string]bool{}
	var mark func(text string)
	mark = func(text string) {
		for _, h := range helpers {
			if !need[h.name] && usesName(text, h.name) {
				need[h.name] = true
				mark(h.text)
			}
		}
	}
	mark(src)
	var b strings.Builder
	for _, h := range helpers {
		if need[h.name] {
			b.WriteString(h.text)
		}
	}
	b.WriteString(src)
	return b.String()
}

// usesName reports whether name occurs in text as a whole identifier.
func usesName(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		before := start == 0 || !isLuaIdent(rune(text[start-1]))
		after := end == len(text) || !isLuaIdent(rune(text[end]))
		if before && after {
			return true
		}
		i = end
	}
}

func isLuaIdent(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// ErrQueueRegistryFull is returned when all 65535 queue numbers are used.
var ErrQueueRegistryFull = errors.New("queue registry is full")

// ErrQueueNotRegistered is returned by QueueNumber with register false for
// a queue the registry does not hold.
var ErrQueueNotRegistered = errors.New("queue not registered")

// Queue numbers of deleted queues come back into use: a process trusts its
// cached numbers for numberCacheTTL, and a freed number is handed out again
// only after numberQuarantine, so no cache still maps it to the old queue.
const (
	numberCacheTTL   = time.Minute
	numberQuarantine = time.Hour
)

// cachedName and cachedNum are registry entries remembered by a process.
type (
	cachedNum struct {
		n  uint16
		at time.Time
	}
	cachedName struct {
		q  string
		at time.Time
	}
)

// RDB is dtq's Redis layer. It is safe for concurrent use.
type RDB struct {
	c    redis.UniversalClient
	keys Keys

	acks       int           // replicas every acknowledged write waits for (SetReplicaAcks)
	ackTimeout time.Duration // how long it waits

	workerBounds WorkerBounds // SetWorkerBounds

	mu       sync.RWMutex
	queueNum map[string]cachedNum
	numQueue map[uint16]cachedName
}

// New returns a Redis layer on c with keys under prefix.
func New(c redis.UniversalClient, prefix string) *RDB {
	return &RDB{c: c, keys: NewKeys(prefix), queueNum: map[string]cachedNum{}, numQueue: map[uint16]cachedName{}}
}

// Client returns the underlying Redis client.
func (r *RDB) Client() redis.UniversalClient { return r.c }

// Keys returns the key builder.
func (r *RDB) Keys() Keys { return r.keys }

// callHook, when set (by this package's tests, before any call), sees the
// name, keys and arguments of every script call before it is sent.
var callHook func(name string, keys []string, args []any)

// run executes script s.
func (r *RDB) run(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	if callHook != nil {
		callHook(s.name, keys, args)
	}
	if r.acks > 0 && s.acked {
		return r.runAcked(ctx, s.rs, keys, args...)
	}
	return s.rs.Run(ctx, r.c, keys, args...)
}

// LoadScripts loads every script into Redis's script cache. /ready uses it to
// tell that Redis is reachable and the scripts are in place.
func (r *RDB) LoadScripts(ctx context.Context) error {
	for name, s := range scripts {
		if err := s.Load(ctx, r.c).Err(); err != nil {
			return fmt.Errorf("load script %s: %w", name, err)
		}
	}
	return nil
}

// ScriptsLoaded reports whether every script is in Redis's script cache.
func (r *RDB) ScriptsLoaded(ctx context.Context) (bool, error) {
	hashes := make([]string, 0, len(scripts))
	for _, s := range scripts {
		hashes = append(hashes, s.Hash())
	}
	exists, err := r.c.ScriptExists(ctx, hashes...).Result()
	if err != nil {
		return false, err
	}
	for _, ok := range exists {
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// QueueNumber returns the registry number of queue, registering it on first
// use. Numbers are cached for numberCacheTTL.
func (r *RDB) QueueNumber(ctx context.Context, queue string) (uint16, error) {
	return r.queueNumber(ctx, queue, true)
}

// DeclaredQueueNumber is QueueNumber for the declared queue policy: a queue
// the registry does not hold is ErrQueueNotRegistered, not registered.
func (r *RDB) DeclaredQueueNumber(ctx context.Context, queue string) (uint16, error) {
	return r.queueNumber(ctx, queue, false)
}

func (r *RDB) queueNumber(ctx context.Context, queue string, register bool) (uint16, error) {
	r.mu.RLock()
	c, ok := r.queueNum[queue]
	r.mu.RUnlock()
	if ok && time.Since(c.at) < numberCacheTTL {
		return c.n, nil
	}
	n, _, err := r.RegisterQueue(ctx, queue, register)
	return n, err
}

// RegisterQueue looks queue up in the registry and, with register, adds it
// when missing. created reports whether this call added it. A missing queue
// without register is ErrQueueNotRegistered.
func (r *RDB) RegisterQueue(ctx context.Context, queue string, register bool) (num uint16, created bool, err error) {
	flag := "0"
	if register {
		flag = "1"
	}
	// The queue's own number key is the authority (it lives with the
	// queue's tasks); the registry is its index and is rebuilt from it.
	qk := r.keys.QueueNum(queue)
	for attempt := 0; ; attempt++ {
		want, err := r.c.Get(ctx, qk).Result()
		if errors.Is(err, redis.Nil) {
			want, err = "", nil
		}
		if err != nil {
			return 0, false, err
		}
		if want == "" && register {
			if err := r.restoreRegistry(ctx); err != nil {
				return 0, false, err
			}
		}
		v, err := r.run(ctx, scriptRegisterQueue, []string{r.keys.Queues()}, queue,
			time.Now().UnixMilli(), numberQuarantine.Milliseconds(), flag, want).Int64Slice()
		if err != nil {
			if strings.Contains(err.Error(), "registry is full") {
				return 0, false, ErrQueueRegistryFull
			}
			return 0, false, err
		}
		if len(v) != 2 {
			return 0, false, fmt.Errorf("register_queue: unexpected reply %v", v)
		}
		if v[0] == 0 {
			return 0, false, ErrQueueNotRegistered
		}
		num = uint16(v[0])
		if want == "" {
			// Written once: a queue keeps the number it was first given.
			set, err := r.c.SetNX(ctx, qk, int64(num), 0).Result()
			if err != nil {
				return 0, false, err
			}
			if !set && attempt == 0 {
				continue // another process wrote it first: the registry follows that number
			}
		}
		r.remember(queue, num)
		return num, v[1] == 1, nil
	}
}

// DeleteQueueResult says what DeleteQueue did.
type DeleteQueueResult struct {
	Deleted bool
	// NotEmpty and Count say what kept a queue (live, scheduled, running,
	// expiring, dead_lettered, ready or delivered tasks) when not Deleted.
	NotEmpty string
	Count    int64
	// Number is the registry number freed.
	Number uint16
}

// DeleteQueue removes an empty queue: one script on the queue's slot checks
// that it holds no task and removes its structures, then one on the
// registry frees its number. It answers ErrQueueNotRegistered for a queue
// the registry does not hold.
func (r *RDB) DeleteQueue(ctx context.Context, queue string) (*DeleteQueueResult, error) {
	if _, _, err := r.RegisterQueue(ctx, queue, false); err != nil {
		return nil, err
	}
	k := r.keys
	keys := []string{k.Depth(queue), k.Schedule(queue), k.Lease(queue), k.Expiry(queue), k.DLQ(queue),
		k.Recent(queue), k.Events(queue), k.Paused(queue)}
	keys = append(append(keys, r.bandStreams(queue)...), k.Retained(queue), k.Tidy(queue), k.LegacyRecent(queue), k.QueueNum(queue))
	v, err := r.run(ctx, scriptDeleteQueue, keys, Group).Slice()
	if err != nil {
		return nil, err
	}
	if n, _ := v[0].(int64); n != 1 {
		what, _ := v[1].(string)
		count, _ := v[2].(int64)
		return &DeleteQueueResult{NotEmpty: what, Count: count}, nil
	}
	num, err := r.run(ctx, scriptUnregisterQueue, []string{k.Queues()}, queue, time.Now().UnixMilli()).Int64()
	if err != nil {
		return nil, err
	}
	r.forget(queue, uint16(num))
	return &DeleteQueueResult{Deleted: true, Number: uint16(num)}, nil
}

func (r *RDB) remember(queue string, n uint16) {
	now := time.Now()
	r.mu.Lock()
	r.queueNum[queue] = cachedNum{n: n, at: now}
	r.numQueue[n] = cachedName{q: queue, at: now}
	r.mu.Unlock()
}

// forgetQueue drops queue's cached number, so the next use asks Redis.
func (r *RDB) forgetQueue(queue string) {
	r.mu.Lock()
	if c, ok := r.queueNum[queue]; ok {
		delete(r.queueNum, queue)
		if cn, ok := r.numQueue[c.n]; ok && cn.q == queue {
			delete(r.numQueue, c.n)
		}
	}
	r.mu.Unlock()
}

func (r *RDB) forget(queue string, n uint16) {
	r.mu.Lock()
	delete(r.queueNum, queue)
	if c, ok := r.numQueue[n]; ok && c.q == queue {
		delete(r.numQueue, n)
	}
	r.mu.Unlock()
}

// QueueName returns the queue registered under num, or "" when none is.
func (r *RDB) QueueName(ctx context.Context, num uint16) (string, error) {
	r.mu.RLock()
	c, ok := r.numQueue[num]
	r.mu.RUnlock()
	if ok && time.Since(c.at) < numberCacheTTL {
		return c.q, nil
	}
	return r.queueNameUncached(ctx, num)
}

// queueNameUncached is QueueName read from Redis. A number the registry
// does not hold is not cached: a registry being rebuilt holds it soon.
func (r *RDB) queueNameUncached(ctx context.Context, num uint16) (string, error) {
	q, err := r.c.HGet(ctx, r.keys.Queues(), "#"+strconv.Itoa(int(num))).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	r.remember(q, num)
	return q, nil
}

// Queues returns every registered queue name, sorted by name.
func (r *RDB) Queues(ctx context.Context) ([]string, error) {
	m, err := r.c.HGetAll(ctx, r.keys.Queues()).Result()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m)/2)
	for name, v := range m {
		if strings.HasPrefix(name, "#") {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil {
			r.remember(name, uint16(n))
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

// ScriptHash returns the SHA1 under which the named script is sent with
// EVALSHA, or "" for no such script. Fault tests use it to pick out one kind
// of call on the wire.
func ScriptHash(name string) string {
	if s, ok := scripts[name]; ok {
		return s.Hash()
	}
	return ""
}

// restoreRegistry rebuilds a registry that holds no numbers (new, or lost
// with its node) from the queues' number keys before a new number is handed
// out, so that a new queue never takes a number existing task ids carry.
// The highest number is restored first: from then on the registry's
// sequence is past every number in use, even while the rest is restored.
func (r *RDB) restoreRegistry(ctx context.Context) error {
	n, err := r.c.HExists(ctx, r.keys.Queues(), "#seq").Result()
	if err != nil || n {
		return err
	}
	type entry struct {
		queue string
		num   int
	}
	var mu sync.Mutex
	var found []entry
	head, tail := r.keys.QueueNum(""), "}"
	head = strings.TrimSuffix(head, tail)
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		it := c.Scan(ctx, 0, head+"*", 1000).Iterator()
		for it.Next(ctx) {
			key := it.Val()
			v, err := c.Get(ctx, key).Int()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return err
			}
			q := strings.TrimSuffix(strings.TrimPrefix(key, head), tail)
			mu.Lock()
			found = append(found, entry{q, v})
			mu.Unlock()
		}
		return it.Err()
	}
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, r.c)
	}
	if err != nil {
		return err
	}
	slices.SortFunc(found, func(a, b entry) int { return b.num - a.num })
	for _, e := range found {
		err := r.run(ctx, scriptRegisterQueue, []string{r.keys.Queues()}, e.queue,
			time.Now().UnixMilli(), numberQuarantine.Milliseconds(), "0", strconv.Itoa(e.num)).Err()
		if err != nil {
			return fmt.Errorf("restore queue %q: %w", e.queue, err)
		}
	}
	return nil
}
