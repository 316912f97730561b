// Package rdb is the only package that talks to Redis. Every state change is
// one Lua script from lua/, run with EVALSHA (falling back to EVAL); Go code
// here only builds keys and arguments and decodes replies.
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
	m := make(map[string]*redis.Script, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "_") {
			continue // shared helpers, prepended to every script
		}
		src, err := luaFS.ReadFile("lua/" + e.Name())
		if err != nil {
			panic(err)
		}
		m[strings.TrimSuffix(e.Name(), ".lua")] = redis.NewScript(string(lib) + "\n" + string(src))
	}
	return m
}

// ErrQueueRegistryFull is returned when all 65535 queue numbers are used.
var ErrQueueRegistryFull = errors.New("queue registry is full")

// RDB is dtq's Redis layer. It is safe for concurrent use.
type RDB struct {
	c    redis.UniversalClient
	keys Keys

	mu       sync.RWMutex
	queueNum map[string]uint16
	numQueue map[uint16]string
}

// New returns a Redis layer on c with keys under prefix.
func New(c redis.UniversalClient, prefix string) *RDB {
	return &RDB{c: c, keys: NewKeys(prefix), queueNum: map[string]uint16{}, numQueue: map[uint16]string{}}
}

// Client returns the underlying Redis client.
func (r *RDB) Client() redis.UniversalClient { return r.c }

// Keys returns the key builder.
func (r *RDB) Keys() Keys { return r.keys }

// run executes the named script.
func (r *RDB) run(ctx context.Context, name string, keys []string, args ...any) *redis.Cmd {
	s, ok := scripts[name]
	if !ok {
		panic("rdb: unknown script " + name)
	}
	return s.Run(ctx, r.c, keys, args...)
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
// use. Numbers never change, so they are cached for the life of the process.
func (r *RDB) QueueNumber(ctx context.Context, queue string) (uint16, error) {
	r.mu.RLock()
	n, ok := r.queueNum[queue]
	r.mu.RUnlock()
	if ok {
		return n, nil
	}
	v, err := r.run(ctx, "register_queue", []string{r.keys.Queues()}, queue).Int64()
	if err != nil {
		if strings.Contains(err.Error(), "registry is full") {
			return 0, ErrQueueRegistryFull
		}
		return 0, err
	}
	n = uint16(v)
	r.remember(queue, n)
	return n, nil
}

func (r *RDB) remember(queue string, n uint16) {
	r.mu.Lock()
	r.queueNum[queue] = n
	r.numQueue[n] = queue
	r.mu.Unlock()
}

// QueueName returns the queue registered under num, or "" when none is.
func (r *RDB) QueueName(ctx context.Context, num uint16) (string, error) {
	r.mu.RLock()
	q, ok := r.numQueue[num]
	r.mu.RUnlock()
	if ok {
		return q, nil
	}
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
