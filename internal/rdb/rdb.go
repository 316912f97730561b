// Package rdb owns dtq's Redis state: every key name and every state change.
// Every state change is one Lua script from lua/, run with EVALSHA (falling
// back to EVAL); Go code here only builds keys and arguments and decodes
// replies. The one other reader is the event feed (cmd/dtq/internal/events),
// which reads the event streams with XREAD and writes nothing.
package rdb

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// scripts are the scripts of lua/ by name, each with the helpers it
// includes prepended; scriptParts says where each line of a script's
// assembled source comes from.
var scripts, scriptParts = loadScripts(false)

// strictScriptsFile is the prelude of the strict-scripts mode, beside lua/.
const strictScriptsFile = "strict_scripts.lua"

//go:embed strict_scripts.lua
var strictScriptsPrelude string

// StrictScripts makes every script fail, from now on, on a key that is not
// one of its KEYS and does not carry the hash tag of one (the check a
// server that enforces declared keys makes), and on a command of more than
// 3,999 arguments (docs/compatibility.md). Each command a script sends
// costs one more (COMMAND GETKEYS), so it is a mode for tests, set in
// TestMain before any script is sent.
func StrictScripts() {
	scripts, scriptParts = loadScripts(true)
	for _, h := range handles {
		h.rs, h.parts = scripts[h.name], scriptParts[h.name]
	}
}

// strictText is a script's text in the strict-scripts mode: the prelude,
// then the text with its redis.call and redis.pcall sent through the
// prelude's checking wrappers.
func strictText(text string) string {
	return strictScriptsPrelude + strings.NewReplacer("redis.call(", "dk_call(", "redis.pcall(", "dk_pcall(").Replace(text)
}

// loadScripts assembles the scripts of lua/; with strict, each checks
// its keys and its calls' sizes (StrictScripts).
func loadScripts(strict bool) (map[string]*redis.Script, map[string][]part) {
	entries, err := luaFS.ReadDir("lua")
	if err != nil {
		panic(err)
	}
	helpers := map[string]*helper{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "_") {
			continue
		}
		src, err := luaFS.ReadFile("lua/" + e.Name())
		if err != nil {
			panic(err)
		}
		for _, h := range splitHelpers(e.Name(), string(src)) {
			if old, ok := helpers[h.name]; ok {
				panic(fmt.Sprintf("rdb: helper %s declared in both lua/%s and lua/%s", h.name, old.file, h.file))
			}
			helpers[h.name] = h
		}
	}
	m := make(map[string]*redis.Script, len(entries))
	parts := make(map[string][]part, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "_") {
			continue // helpers, prepended to the scripts that include them
		}
		src, err := luaFS.ReadFile("lua/" + e.Name())
		if err != nil {
			panic(err)
		}
		text, p, err := assemble(helpers, e.Name(), string(src))
		if err != nil {
			panic("rdb: " + err.Error())
		}
		if strict {
			text = strictText(text)
			p = append([]part{{file: strictScriptsFile, line: 1, lines: strings.Count(strictScriptsPrelude, "\n")}}, p...)
		}
		name := strings.TrimSuffix(e.Name(), ".lua")
		m[name], parts[name] = redis.NewScript(text), p
	}
	return m, parts
}

// helper is one top-level declaration of a lua/_*.lua file ("local
// function x" or "local x ="), with the comment lines right above it.
// Its "--! uses: a, b" lines name the helpers it calls.
type helper struct {
	name string
	file string
	line int // of its first line in file, from 1
	text string
	uses []string
}

// part is a run of lines of an assembled script: lines line.. of file.
type part struct {
	file  string
	line  int
	lines int
}

// splitHelpers cuts a helper file into its top-level declarations, in
// order. The file's own header comment is dropped.
func splitHelpers(file, src string) []*helper {
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	var out []*helper
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
		if len(out) > 0 {
			prev := out[len(out)-1]
			prev.text = strings.Join(lines[prev.line-1:start], "\n") + "\n"
		}
		out = append(out, &helper{name: name, file: file, line: start + 1})
	}
	if len(out) > 0 {
		last := out[len(out)-1]
		last.text = strings.Join(lines[last.line-1:], "\n") + "\n"
	}
	for _, h := range out {
		h.uses = directive(h.text, "--! uses:")
	}
	return out
}

func isLuaIdent(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// directive lists the names on every line of text that starts with head.
func directive(text, head string) []string {
	var names []string
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(line, head); ok {
			for n := range strings.SplitSeq(rest, ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
		}
	}
	return names
}

// assemble prepends to src the helpers its "--! include:" lines name, and
// those the helpers use, each after the helpers it uses. Every call of a
// script runs its prelude (each helper is a closure or table created anew),
// so a script carries only what it includes.
func assemble(helpers map[string]*helper, file, src string) (string, []part, error) {
	var b strings.Builder
	var parts []part
	state := map[string]int{} // 1 being added, 2 added
	var add func(name, by string) error
	add = func(name, by string) error {
		h, ok := helpers[name]
		if !ok {
			return fmt.Errorf("lua/%s includes %s, which no lua/_*.lua declares", by, name)
		}
		switch state[name] {
		case 1:
			return fmt.Errorf("helper %s uses itself (through lua/%s)", name, by)
		case 2:
			return nil
		}
		state[name] = 1
		for _, u := range h.uses {
			if err := add(u, h.file); err != nil {
				return err
			}
		}
		state[name] = 2
		b.WriteString(h.text)
		parts = append(parts, part{file: h.file, line: h.line, lines: strings.Count(h.text, "\n")})
		return nil
	}
	for _, name := range directive(src, "--! include:") {
		if err := add(name, file); err != nil {
			return "", nil, err
		}
	}
	b.WriteString(src)
	parts = append(parts, part{file: file, line: 1, lines: strings.Count(src, "\n") + 1})
	return b.String(), parts, nil
}

// position is where line n of an assembled script comes from, as
// lua/file:line, or "" past its end.
func position(parts []part, n int) string {
	for _, p := range parts {
		if n <= p.lines {
			if p.file == strictScriptsFile {
				return fmt.Sprintf("%s:%d", p.file, p.line+n-1)
			}
			return fmt.Sprintf("lua/%s:%d", p.file, p.line+n-1)
		}
		n -= p.lines
	}
	return ""
}

// scriptLine is a line number as Redis reports it in a script error.
var scriptLine = regexp.MustCompile(`user_script:(\d+)`)

// scriptError is a Redis script error whose line numbers are followed by
// the file and line they come from.
type scriptError struct{ msg string }

func (e scriptError) Error() string { return e.msg }

// RedisError makes scriptError a redis.Error, as the error it rewrites was.
func (scriptError) RedisError() {}

// placeError rewrites a script error's "user_script:N" into
// "user_script:N (lua/file.lua:M)"; other errors are returned as they are.
func placeError(parts []part, err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "user_script:") {
		return err
	}
	return scriptError{scriptLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "user_script:"))
		if pos := position(parts, n); pos != "" {
			return m + " (" + pos + ")"
		}
		return m
	})}
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

	mu         sync.RWMutex
	queueNum   map[string]cachedNum
	numQueue   map[uint16]cachedName
	parts      map[string]cachedParts // Partitions
	restoredAt time.Time              // the last rebuild tried on a miss (queueNameFresh)

	queuesMu   sync.Mutex // Queues' copy of the registry's names
	queuesList []string
	queuesGen  string
	queuesAt   time.Time

	fairMu    sync.Mutex
	fairFlags map[string]queueFlags // flags
}

// New returns a Redis layer on c with keys under prefix.
func New(c redis.UniversalClient, prefix string) *RDB {
	return &RDB{c: c, keys: NewKeys(prefix), queueNum: map[string]cachedNum{}, numQueue: map[uint16]cachedName{},
		parts: map[string]cachedParts{}}
}

// eachMaster runs fn on every master of a Redis Cluster, concurrently, or
// on the one server otherwise: for what each master holds or reports
// alone (INFO, CONFIG, SCAN).
func (r *RDB) eachMaster(ctx context.Context, fn func(context.Context, redis.UniversalClient) error) error {
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
	}
	return fn(ctx, r.c)
}

// Client returns the underlying Redis client.
func (r *RDB) Client() redis.UniversalClient { return r.c }

// Keys returns the key builder.
func (r *RDB) Keys() Keys { return r.keys }

// run executes script s. Production code calls it through the typed call
// methods scriptgen writes (scripts_gen.go).
func (r *RDB) run(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	var cmd *redis.Cmd
	if r.acks > 0 && s.acked {
		cmd = r.runAcked(ctx, s.rs, keys, args...)
	} else {
		cmd = s.rs.Run(ctx, r.c, keys, args...)
	}
	if err := cmd.Err(); err != nil {
		cmd.SetErr(placeError(s.parts, err))
	}
	return cmd
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
		v, err := r.callRegisterQueue(ctx, &registerQueueKeys{Registry: r.keys.Queues()}, &registerQueueArgs{
			Queue: queue, Now: time.Now().UnixMilli(), QuarantineMS: numberQuarantine.Milliseconds(), Register: flag, Number: want,
		})
		if err != nil {
			if strings.Contains(err.Error(), "registry is full") {
				return 0, false, ErrQueueRegistryFull
			}
			return 0, false, err
		}
		if v.Number == 0 {
			return 0, false, ErrQueueNotRegistered
		}
		if err := r.rememberParts(queue, v.Partitions); err != nil {
			return 0, false, err
		}
		n, ok := queueNumber(v.Number)
		if !ok {
			return 0, false, fmt.Errorf("register_queue: number %d out of range", v.Number)
		}
		num = n
		if want == "" {
			// Written once: a queue keeps the number it was first given.
			set, err := r.c.SetNX(ctx, qk, int64(num), 0).Result()
			if err != nil {
				return 0, false, err
			}
			if !set && attempt == 0 {
				continue // another process wrote it first: the registry follows that number
			}
			// The one call that writes the number key created the queue.
			// The script's own flag cannot tell: sent again after its
			// reply was lost, it finds the entry its first run made.
			created = set
		}
		r.remember(queue, num)
		return num, created, nil
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
	v, err := r.callDeleteQueue(ctx, &deleteQueueKeys{
		Depth: k.Depth(queue), Schedule: k.Schedule(queue), Lease: k.Lease(queue), Expiry: k.Expiry(queue), DLQ: k.DLQ(queue),
		Recent: k.Recent(queue), Events: k.Events(queue), Paused: k.Paused(queue), Bands: r.bandStreams(queue),
		Retained: k.Retained(queue), Tidy: k.Tidy(queue), Number: k.QueueNum(queue), FairState: k.FairState(queue),
		FairKeys: k.FairKeys(queue), FairDelay: k.FairDelay(queue), KeyRate: k.KeyRate(queue),
		DedupCounts: k.DedupCounts(queue), KeyFreed: k.KeyFreed(queue),
	}, &deleteQueueArgs{Group: Group, FairActive: k.FairActivePrefix(queue), KeyQueue: k.KeyQueuePrefix(queue)})
	if err != nil {
		return nil, err
	}
	if v.Deleted != 1 {
		return &DeleteQueueResult{NotEmpty: v.What, Count: v.Count}, nil
	}
	num, err := r.callUnregisterQueue(ctx, &unregisterQueueKeys{Registry: k.Queues()},
		&unregisterQueueArgs{Queue: queue, Now: time.Now().UnixMilli()})
	if err != nil {
		return nil, err
	}
	n, _ := queueNumber(num) // 0 when the script answers none
	r.forget(queue, n)
	return &DeleteQueueResult{Deleted: true, Number: n}, nil
}

// queueNumber is a registry number read from Redis, ok when it fits the
// 16 bits a task id holds (numbers are 1 … 65535).
func queueNumber(v int64) (uint16, bool) {
	if v < 0 || v > 0xffff {
		return 0, false
	}
	return uint16(v), true
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
	delete(r.parts, queue)
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
	delete(r.parts, queue)
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

// TaskQueue returns the queue task id belongs to ("" when the id is not
// a task id or its number names no queue). A cached name is trusted only
// when that queue holds the task: otherwise the registry is read again,
// and rebuilt from the queues' number keys when it was lost, so that
// neither a stale cache nor a lost registry hides an existing task.
func (r *RDB) TaskQueue(ctx context.Context, id string) (string, error) {
	num, ok := ParseTaskID(id)
	if !ok {
		return "", nil
	}
	q, err := r.QueueName(ctx, num)
	if err != nil {
		return "", err
	}
	if q != "" {
		n, err := r.c.Exists(ctx, r.keys.Task(q, id)).Result()
		if err != nil || n == 1 {
			return q, err
		}
	}
	return r.queueNameFresh(ctx, num)
}

// queueNameFresh is QueueName read from Redis, after rebuilding a lost
// registry (at most once per restoreEvery in a process: a miss is cheap to
// cause, a rebuild scans the keyspace).
func (r *RDB) queueNameFresh(ctx context.Context, num uint16) (string, error) {
	q, err := r.queueNameUncached(ctx, num)
	if err != nil || q != "" {
		return q, err
	}
	r.mu.Lock()
	due := time.Since(r.restoredAt) >= restoreEvery
	if due {
		r.restoredAt = time.Now()
	}
	r.mu.Unlock()
	if !due {
		return "", nil
	}
	if err := r.restoreRegistry(ctx); err != nil {
		return "", err
	}
	return r.queueNameUncached(ctx, num)
}

// restoreEvery spaces the registry rebuilds a process tries on misses.
const restoreEvery = 10 * time.Second

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

// Queues returns every registered queue name, sorted by name. The names
// are read in full only when the registry's change counter ("#gen", moved by
// register_queue and unregister_queue) differs from the last full read's, or
// that read is queuesRefresh old: background loops that list the queues
// every second cost one HGET each, not a read of every name.
func (r *RDB) Queues(ctx context.Context) ([]string, error) {
	r.queuesMu.Lock()
	defer r.queuesMu.Unlock()
	if r.queuesList != nil && time.Since(r.queuesAt) < queuesRefresh {
		gen, err := r.c.HGet(ctx, r.keys.Queues(), "#gen").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		if gen == r.queuesGen {
			return slices.Clone(r.queuesList), nil
		}
	}
	at := time.Now()
	m, err := r.c.HGetAll(ctx, r.keys.Queues()).Result()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m)/2)
	for name, v := range m {
		if strings.HasPrefix(name, "#") {
			continue
		}
		if n, err := strconv.ParseUint(v, 10, 16); err == nil {
			r.remember(name, uint16(n))
		}
		out = append(out, name)
	}
	slices.Sort(out)
	r.queuesList, r.queuesGen, r.queuesAt = out, m["#gen"], at
	return slices.Clone(out), nil
}

// queuesRefresh bounds how long Queues trusts the change counter alone: a
// registry lost and rebuilt to the same count is read again within it.
const queuesRefresh = 30 * time.Second

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
//
// A server that refuses SCAN (managed services deny it) cannot be searched:
// the registry is taken as new, which it is on a new deployment. A registry
// lost there is not rebuilt, so keep persistence on where SCAN is refused
// (docs/compatibility.md).
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
	if err := r.eachMaster(ctx, scan); err != nil {
		if refused(err) {
			return nil
		}
		return err
	}
	slices.SortFunc(found, func(a, b entry) int { return b.num - a.num })
	for _, e := range found {
		_, err := r.callRegisterQueue(ctx, &registerQueueKeys{Registry: r.keys.Queues()}, &registerQueueArgs{
			Queue: e.queue, Now: time.Now().UnixMilli(), QuarantineMS: numberQuarantine.Milliseconds(), Register: "0",
			Number: strconv.Itoa(e.num),
		})
		if err != nil {
			return fmt.Errorf("restore queue %q: %w", e.queue, err)
		}
	}
	return nil
}

// zMember is a sorted set entry's member as go-redis reads it: the *Z
// replies of ZRANGE and its kin always hold it as a string.
func zMember(z redis.Z) string {
	if s, ok := z.Member.(string); ok {
		return s
	}
	return fmt.Sprint(z.Member)
}

// IsOOM reports whether err is Redis refusing a write at its maxmemory
// (an OOM error reply): nothing was written, and the caller may retry later.
func IsOOM(err error) bool { return redis.IsOOMError(err) }

// refused reports whether err is the server refusing a command, as an ACL
// (NOPERM) or a managed service that renamed or removed it (unknown
// command) does.
func refused(err error) bool {
	if redis.HasErrorPrefix(err, "NOPERM") {
		return true
	}
	_, isRedis := errors.AsType[redis.Error](err)
	return isRedis && strings.HasPrefix(err.Error(), "ERR unknown command")
}
