// Package events serves dtq's event feed: task, queue and worker events
// read from the Redis event streams and sent to clients over Server-Sent
// Events (GET /api/v1/events) and WebSocket (GET /ws/events).
//
// A Hub runs one reader per queue stream per process and fans the events out
// to every subscription. The readers share a few Redis connections: one
// blocking XREAD reads up to 256 streams (see group.go). Clients resume from
// an opaque cursor without loss or duplication while the events are
// retained; a cursor older than the retention gets an explicit reset, never
// a silent gap.
package events

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/rdb"
)

// ErrHubClosed is returned by Subscribe and Subscription.Next once the
// hub's Run has returned.
var ErrHubClosed = errors.New("events: hub closed")

// ErrTooManySubscribers is returned by Subscribe when the hub already has
// Config.MaxSubscribers subscriptions.
var ErrTooManySubscribers = errors.New("events: too many subscribers")

// DefaultMaxSubscribers is Config.MaxSubscribers's default (docs/security.md).
const DefaultMaxSubscribers = 1000

// Config configures a Hub. The zero value of every field selects the
// default in its comment.
type Config struct {
	// Logger receives reader outages and recoveries. Default: discard.
	Logger *slog.Logger
	// BlockingClient serves the readers' reads. The readers are grouped by
	// 256 streams; a group with a watched stream uses one connection at a
	// time, blocked in one XREAD over all its streams when it is a
	// *redis.Client. Default: when the RDB's client is a *redis.Client, one
	// connection per such group, dialled with the same address and
	// credentials and closed when the group has no watched stream left;
	// otherwise (Redis Cluster) the RDB's client itself, polled every
	// StreamPollInterval.
	BlockingClient redis.UniversalClient
	// PollInterval is how often the queue registry is read to find new
	// queues. Default 1s.
	PollInterval time.Duration
	// Block bounds each blocking read, and so how long Run takes to stop
	// and how long a queue's first subscription may wait before its reader
	// starts. Default 1s.
	Block time.Duration
	// StreamPollInterval is how often the watched streams are polled where
	// one XREAD cannot block on many of them: on Redis Cluster, whose keys
	// of different queues lie in different slots, and with any client but
	// a *redis.Client. Default 200ms.
	StreamPollInterval time.Duration
	// RingSize is how many recent events per queue are kept in memory for
	// the subscriptions that keep up. Default 1024.
	RingSize int
	// BatchSize is how many entries one Redis read returns. Default 256.
	BatchSize int
	// KeepAlive is how often an idle SSE stream gets a comment and an idle
	// WebSocket a ping. Default 15s.
	KeepAlive time.Duration
	// WriteTimeout bounds each write to a client; a client that does not
	// read for that long is disconnected. Default 30s.
	WriteTimeout time.Duration
	// WriteError writes an error answer before a stream starts (a bad query
	// is 400 INVALID_REQUEST with details.field). Default: the API's JSON
	// error envelope with request_id from the X-Request-ID header.
	WriteError func(w http.ResponseWriter, r *http.Request, status int, code, msg string, details map[string]any)
	// MaxSubscribers bounds the open subscriptions (SSE and WebSocket
	// clients) of the hub; Subscribe refuses more with
	// ErrTooManySubscribers, answered 503. Each one holds a connection, a
	// goroutine and its buffers. Default 1000.
	MaxSubscribers int
	// OriginPatterns are the extra origins allowed to open the WebSocket
	// (the request's own host always is); see websocket.AcceptOptions.
	// Default: none.
	OriginPatterns []string
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.PollInterval <= 0 {
		out.PollInterval = time.Second
	}
	if out.Block <= 0 {
		out.Block = time.Second
	}
	out.Block = max(out.Block, time.Millisecond) // XREAD BLOCK 0 would never end
	if out.StreamPollInterval <= 0 {
		out.StreamPollInterval = 200 * time.Millisecond
	}
	if out.RingSize <= 0 {
		out.RingSize = 1024
	}
	if out.BatchSize <= 0 {
		out.BatchSize = 256
	}
	if out.KeepAlive <= 0 {
		out.KeepAlive = 15 * time.Second
	}
	if out.WriteTimeout <= 0 {
		out.WriteTimeout = 30 * time.Second
	}
	if out.MaxSubscribers <= 0 {
		out.MaxSubscribers = DefaultMaxSubscribers
	}
	if out.WriteError == nil {
		out.WriteError = writeErrorEnvelope
	}
	return out
}

// Hub reads the event streams and serves subscriptions. Create it with
// NewHub and keep Run running while the handlers serve; it is safe for
// concurrent use.
type Hub struct {
	rdb  *rdb.RDB
	main redis.UniversalClient
	cfg  Config
	log  *slog.Logger

	// How the groups read, set by Run: blocking on many streams at once,
	// or polling; and, when the groups dial connections of their own, the
	// options to dial with.
	blocking    bool
	own         *redis.Options
	pollStreams bool // tests: poll even a single Redis, as on Cluster

	mu      sync.Mutex
	started bool
	readers map[string]*reader
	groups  []*group // each reads up to streamsPerRead readers
	gen     uint64   // bumped when a reader is added
	subs    map[*Subscription]struct{}
	done    chan struct{} // closed when Run returns

	clockSkewMS atomic.Int64 // Redis's clock minus ours, in ms

	catchupReads atomic.Int64
	resets       atomic.Int64
	refused      atomic.Int64 // subscriptions refused by MaxSubscribers
}

// NewHub returns a hub reading, through c, the event streams of the dtq
// deployment whose keys start with prefix. It starts nothing: call Run.
func NewHub(c redis.UniversalClient, prefix string, cfg *Config) (*Hub, error) {
	if c == nil {
		return nil, errors.New("events: NewHub needs a Redis client")
	}
	r := rdb.New(c, prefix)
	conf := cfg.withDefaults()
	return &Hub{
		rdb: r, main: r.Client(), cfg: conf, log: conf.Logger,
		readers: map[string]*reader{}, subs: map[*Subscription]struct{}{},
		done: make(chan struct{}),
	}, nil
}

// Run reads the event streams until ctx ends: one reader for the worker
// events, one per queue of the registry, and a poll of the registry every
// PollInterval for new queues. The readers are read in groups of 256
// streams, each group on one connection (on Cluster, one per node) while
// any of its streams is watched. Redis outages are retried with backoff.
// When ctx ends, Run stops the readers, ends every subscription (their
// handlers return) and returns nil. A hub runs once.
func (h *Hub) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.started {
		h.mu.Unlock()
		return errors.New("events: Hub.Run called twice")
	}
	h.started = true
	h.mu.Unlock()

	h.blocking, h.own = readMode(h.cfg.BlockingClient, h.main)
	h.blocking = h.blocking && !h.pollStreams

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		h.mu.Lock()
		close(h.done)
		h.mu.Unlock()
	}()

	h.addReader(ctx, &wg, SysQueue, h.rdb.Keys().SysEvents())
	tick := time.NewTicker(h.cfg.PollInterval)
	defer tick.Stop()
	registryDown := false // log an outage once, not every poll
	for {
		err := h.poll(ctx, &wg)
		switch {
		case err != nil && ctx.Err() == nil && !registryDown:
			registryDown = true
			h.log.Warn("event feed cannot read the queue registry; retrying", "err", err)
		case err == nil && registryDown:
			registryDown = false
			h.log.Info("event feed reads the queue registry again")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// readMode tells whether the groups can block on many streams with one
// XREAD (a single Redis, or a Sentinel-managed one), and the options to
// dial their own connections with when no client was given for them.
func readMode(given, main redis.UniversalClient) (bool, *redis.Options) {
	if given != nil {
		_, single := given.(*redis.Client)
		return single, nil
	}
	opt, single := rdb.DedicatedOptions(main)
	return single, opt
}

// readClient returns the client a group reads on while it has watched
// streams, and how to give it back when the group parks.
func (h *Hub) readClient() (redis.UniversalClient, func()) {
	switch {
	case h.cfg.BlockingClient != nil:
		return h.cfg.BlockingClient, func() {}
	case h.own == nil || !h.blocking:
		return h.main, func() {}
	}
	own := redis.NewClient(h.own)
	return own, func() { _ = own.Close() }
}

// poll starts readers for queues registered since the last poll, and
// measures Redis's clock against ours.
func (h *Hub) poll(ctx context.Context, wg *sync.WaitGroup) error {
	before := time.Now()
	now, err := redisNow(ctx, h.main)
	if err != nil {
		return err
	}
	local := before.Add(time.Since(before) / 2)
	h.clockSkewMS.Store(now.UnixMilli() - local.UnixMilli())

	queues, err := h.rdb.Queues(ctx)
	if err != nil {
		return err
	}
	for _, q := range queues {
		h.addReader(ctx, wg, q, h.rdb.Keys().Events(q))
	}
	return nil
}

func (h *Hub) addReader(ctx context.Context, wg *sync.WaitGroup, queue, key string) {
	h.mu.Lock()
	if _, ok := h.readers[queue]; ok {
		h.mu.Unlock()
		return
	}
	r := newReader(h, queue, key)
	r.group = h.groupWithRoomLocked(ctx, wg)
	r.group.add(r)
	h.readers[queue] = r
	h.gen++
	for s := range h.subs {
		s.wake()
	}
	h.mu.Unlock()
}

// groupWithRoomLocked returns the newest group, or a new running one when
// it is full. h.mu is held.
func (h *Hub) groupWithRoomLocked(ctx context.Context, wg *sync.WaitGroup) *group {
	if n := len(h.groups); n > 0 && !h.groups[n-1].full() {
		return h.groups[n-1]
	}
	g := newGroup(h)
	h.groups = append(h.groups, g)
	wg.Go(func() { g.run(ctx) })
	return g
}

// now estimates Redis's clock, which stamps the stream ids.
func (h *Hub) now() time.Time {
	return time.Now().Add(time.Duration(h.clockSkewMS.Load()) * time.Millisecond)
}

// Stats are counters for monitoring and tests.
type Stats struct {
	// Readers is the number of streams read (queues plus the worker events).
	Readers int
	// Subscriptions is the number of open subscriptions.
	Subscriptions int
	// CatchupReads counts reads from Redis for subscriptions that were
	// behind the in-memory ring.
	CatchupReads int64
	// Resets counts subscriptions whose position had been trimmed away.
	Resets int64
	// Refused counts subscriptions refused because MaxSubscribers were
	// open.
	Refused int64
}

// Stats returns the hub's counters.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Readers: len(h.readers), Subscriptions: len(h.subs),
		CatchupReads: h.catchupReads.Load(), Resets: h.resets.Load(), Refused: h.refused.Load()}
}

// SubscriberCounts returns the open subscriptions and how many were refused
// for MaxSubscribers so far, for the API's metrics.
func (h *Hub) SubscriberCounts() (open int, refused int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs), h.refused.Load()
}
