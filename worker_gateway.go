package dtq

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/attempt"
	"github.com/dtq-io/dtq/internal/jsonscan"
	"github.com/dtq-io/dtq/internal/maintenance"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Bounds of remote (HTTP) worker calls.
const (
	// MaxClaimWait bounds how long a claim waits for tasks.
	MaxClaimWait = 30 * time.Second
	// MinRemoteLease and MaxRemoteLease bound the lease of a remote claim
	// or heartbeat; DefaultRemoteLease is used when none is given.
	MinRemoteLease     = 5 * time.Second
	MaxRemoteLease     = time.Hour
	DefaultRemoteLease = 30 * time.Second
	// MaxClaimTasks bounds the tasks one claim may ask for.
	MaxClaimTasks = 100
	// MaxClaimQueues bounds the queues one claim may name.
	MaxClaimQueues = 16
	// MinLeaseSecretLen is the shortest WorkerGatewayConfig.LeaseSecret
	// (DTQ_LEASE_SECRET) NewWorkerGateway accepts, in bytes.
	MinLeaseSecretLen = 32
)

var workerIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`)

// validWorkerID reports whether id is a valid worker id (the form
// DTQ_WORKER_ID accepts): 1..128 characters of A-Z a-z 0-9 _ . : @ -.
func validWorkerID(id string) bool { return workerIDPattern.MatchString(id) }

// WorkerGateway runs tasks on behalf of workers that are not Go programs
// and reach dtq over HTTP (docs/http-workers.md): it claims, renews and
// finalizes with the same scripts,
// leases and fencing as a Worker. A lease token names the attempt, the
// worker id and the claim that started the attempt, authenticated by an
// HMAC under the deployment's lease secret: a token cannot be forged or
// altered, and a stale one is refused exactly as a Go worker that lost its
// lease is. The task's priority and max_attempts always come from Redis,
// never from the token. Run keeps expired leases of the queues claimed
// through it coming back (and their due retries promoted), so HTTP workers
// need no Go worker beside them. It is safe for concurrent use.
type WorkerGateway struct {
	rdb      *rdb.RDB
	cfg      WorkerConfig // the WorkerGatewayConfig, with WorkerConfig's defaults
	dep      deployment
	settings rdb.WorkerSettings // the reclaimer's; claims copy it per worker
	spread   atomic.Uint64      // rotates the first partition a claim tries (claimTargets)
	// waiter serves the waits of claims that found nothing, on
	// connections of their own: a claim naming a partitioned queue waits
	// on each partition, which would hold as many of the pool's.
	waiter *rdb.Waiter

	secretMu sync.Mutex
	secret   []byte // the lease token key: configured, or read from Redis once

	mu sync.Mutex
	// serviced holds the queues claimed from, whose maintenance Run runs.
	serviced     map[string]bool
	servicedFull bool // maxServicedQueues was reached (logged once)
	// startServicing, set while Run runs, starts a newly claimed queue's
	// loops under Run's context (Run owns that context; g only holds this
	// func).
	startServicing func(queue string)
	loops          sync.WaitGroup
	waiters        sync.WaitGroup // background waits of multi-queue claims
}

// WorkerGatewayConfig configures a WorkerGateway: the settings of the tasks
// HTTP workers run, beside the Deployment's (a claim by a new worker id
// past DeploymentConfig.MaxWorkers is a TooManyWorkersError). The zero
// value of every field selects its default.
type WorkerGatewayConfig struct {
	// These mean what WorkerConfig's fields of the same names mean, with
	// the same defaults and ranges: the backoff of HTTP workers' retryable
	// failures and the cap on their results.
	RetryBaseDelay, RetryMaxDelay time.Duration
	RetryJitter                   float64
	ResultMaxBytes                int

	// WorkerID names this process in the tasks its reclaimer takes back.
	// Default api-hostname-pid-random.
	WorkerID string
	// VisibilityTimeout is the lease the finalize calls are fenced with.
	// Default 30s. A claim's own lease is ClaimRequest.Lease.
	VisibilityTimeout time.Duration
	// HeartbeatInterval is how often Run looks for expired leases; at most
	// VisibilityTimeout/3. Default 5s.
	HeartbeatInterval time.Duration
	// Logger receives the WorkerGateway's warnings. Default slog.Default().
	Logger *slog.Logger
	// LeaseSecret authenticates lease tokens (DTQ_LEASE_SECRET), at least
	// MinLeaseSecretLen bytes. Every API process of a deployment must have
	// the same one; changing it invalidates outstanding tokens. Default: a
	// random secret the first WorkerGateway of the deployment stores in
	// Redis, which every other one then reads (once per WorkerGateway).
	LeaseSecret string
	// MaxWorkersPerKey bounds the worker ids one API key
	// (ClaimRequest.Key) registers (DTQ_MAX_WORKERS_PER_KEY): a claim by a
	// new id past it is a TooManyWorkersError. Default
	// DefaultMaxWorkersPerKey.
	MaxWorkersPerKey int64
}

// workerConfig is c as the WorkerConfig whose settings, defaults and
// checks it shares.
func (c *WorkerGatewayConfig) workerConfig() *WorkerConfig {
	return &WorkerConfig{
		WorkerID: c.WorkerID, VisibilityTimeout: c.VisibilityTimeout, HeartbeatInterval: c.HeartbeatInterval,
		RetryBaseDelay: c.RetryBaseDelay, RetryMaxDelay: c.RetryMaxDelay, RetryJitter: c.RetryJitter,
		ResultMaxBytes: c.ResultMaxBytes, Logger: c.Logger,
	}
}

// NewWorkerGateway returns a WorkerGateway of d's queues, configured by cfg
// (nil: all defaults). It fails when a setting is out of range, as
// NewWorker does, or LeaseSecret is set but shorter than MinLeaseSecretLen.
func (d *Deployment) NewWorkerGateway(cfg *WorkerGatewayConfig) (*WorkerGateway, error) {
	var rc WorkerGatewayConfig
	if cfg != nil {
		rc = *cfg
	}
	o := rc.workerConfig()
	if o.WorkerID == "" {
		host, _ := os.Hostname()
		o.WorkerID = fmt.Sprintf("api-%s-%d-%s", host, os.Getpid(), attempt.NewNonce()[:6])
	}
	conf, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	perKey := rc.MaxWorkersPerKey
	if perKey == 0 {
		perKey = DefaultMaxWorkersPerKey
	}
	if perKey < 0 {
		return nil, errors.New("dtq: MaxWorkersPerKey must not be negative")
	}
	if rc.LeaseSecret != "" && len(rc.LeaseSecret) < MinLeaseSecretLen {
		return nil, fmt.Errorf("dtq: LeaseSecret must be at least %d bytes", MinLeaseSecretLen)
	}
	g := &WorkerGateway{
		rdb:      d.storage(),
		cfg:      conf,
		dep:      d.dep,
		serviced: map[string]bool{},
	}
	g.waiter = g.rdb.NewWaiter()
	g.rdb.SetWorkerBounds(rdb.WorkerBounds{Max: d.dep.maxWorkers, MaxPerKey: perKey})
	if rc.LeaseSecret != "" {
		g.secret = []byte(rc.LeaseSecret)
	}
	g.settings = d.dep.workerSettings(conf.WorkerID, conf.VisibilityTimeout)
	return g, nil
}

// ClaimRequest is one remote worker's claim.
type ClaimRequest struct {
	// WorkerID names the worker; it fences the tasks claimed (validated like
	// DTQ_WORKER_ID). Required.
	WorkerID string
	// Queues are served in the order given. 1..MaxClaimQueues valid names.
	Queues []string
	// Max is how many tasks to claim at most, 1..MaxClaimTasks. Default 1.
	Max int
	// Wait is how long to wait for a first task, 0..MaxClaimWait.
	Wait time.Duration
	// Lease is each task's lease, MinRemoteLease..MaxRemoteLease. Default
	// DefaultRemoteLease.
	Lease time.Duration
	// Key names the API key the request came with: a new worker id counts
	// against its WorkerGatewayConfig.MaxWorkersPerKey. "" = none (only
	// MaxWorkers applies).
	Key string
}

// LeasedTask is a task a remote worker now runs, under its lease.
type LeasedTask struct {
	ID             string          `json:"task_id"`
	Queue          string          `json:"queue"`
	Type           string          `json:"task_type"`
	Payload        json.RawMessage `json:"payload"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	TimeoutMS      int64           `json:"timeout_ms"`
	Metadata       json.RawMessage `json:"metadata"`
	IdempotencyKey *string         `json:"idempotency_key"`
	Priority       int             `json:"priority"`
	// CancelRequested is set when a cancel was requested before the claim:
	// the worker should stop and fail the task (it then ends cancelled).
	CancelRequested bool `json:"cancel_requested"`
	// LeaseToken fences the heartbeat, complete and fail calls of this
	// attempt. It is opaque: bound to this claim by an HMAC under the
	// deployment's lease secret, it cannot be forged or altered.
	LeaseToken     string       `json:"lease_token"`
	LeaseExpiresAt dtqtype.Time `json:"lease_expires_at"`
	// WorkflowID and Ref name the workflow node the task is (absent for a
	// plain task); Deps are its deps' outcomes by ref, each a DepResult
	// ({status, result, error_class, task_id, result_omitted}; {} for a
	// node without deps).
	WorkflowID string          `json:"workflow_id,omitempty"`
	Ref        string          `json:"ref,omitempty"`
	Deps       json.RawMessage `json:"deps,omitempty"`
}

// leaseToken is what a lease token carries: the attempt it fences and the
// nonce of the claim call that started it (the task hash's claim field).
// Nothing else: what the server needs of the task (band, max_attempts) it
// reads from Redis. A token is base64url(JSON body) "." base64url(MAC),
// the MAC an HMAC-SHA256 of the body's bytes under the lease secret, so
// that no byte of it can be changed.
type leaseToken struct {
	ID      string `json:"i"`
	Queue   string `json:"q"`
	Attempt int    `json:"a"`
	Worker  string `json:"w"`
	Claim   string `json:"n"`

	body, sum []byte // as decoded: what verify checks
}

// leaseMACDomain starts every MAC input, so that the secret's MACs cannot
// be taken for anything but lease tokens of this layout.
const leaseMACDomain = "dtq lease token v1\x00"

var tokenEncoding = base64.RawURLEncoding.Strict()

func leaseMAC(secret, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(leaseMACDomain))
	m.Write(body)
	return m.Sum(nil)
}

func (t *leaseToken) encode(secret []byte) string {
	body := mustJSON(t)
	return tokenEncoding.EncodeToString(body) + "." + tokenEncoding.EncodeToString(leaseMAC(secret, body))
}

// parseToken decodes a lease token. A token whose body does not decode is
// invalid input; one whose body decodes is checked by verify, which refuses
// it when its MAC is missing or wrong.
func parseToken(s string) (*leaseToken, error) {
	if len(s) == 0 || len(s) > 1024 {
		return nil, invalid("lease_token", "is required: pass the lease_token the claim returned")
	}
	b64, mac, _ := strings.Cut(s, ".")
	body, err := tokenEncoding.DecodeString(b64)
	var t leaseToken
	if err != nil || json.Unmarshal(body, &t) != nil || !ValidQueueName(queueOf(t.Queue)) || !validWorkerID(t.Worker) ||
		t.Attempt < 1 || t.ID == "" {
		return nil, invalid("lease_token", "is not a lease token this API issued; pass the lease_token the claim returned")
	}
	t.body = body
	t.sum, _ = tokenEncoding.DecodeString(mac) // a bad MAC fails verify
	return &t, nil
}

// verify tells whether t is a token the deployment issued for task id:
// a token of another task, or one whose MAC does not match (forged,
// altered, or issued under another secret), is a lost lease. The MACs are
// compared in constant time.
func (t *leaseToken) verify(id string, secret []byte) error {
	if !hmac.Equal(t.sum, leaseMAC(secret, t.body)) || t.ID != id || t.Claim == "" {
		return ErrLeaseLost
	}
	return nil
}

// verifiedToken decodes and verifies the lease token of task id.
func (g *WorkerGateway) verifiedToken(ctx context.Context, id, s string) (*leaseToken, error) {
	t, err := parseToken(s)
	if err != nil {
		return nil, err
	}
	secret, err := g.leaseSecret(ctx)
	if err != nil {
		return nil, err
	}
	if err := t.verify(id, secret); err != nil {
		return nil, err
	}
	return t, nil
}

// leaseSecret returns the key lease tokens are authenticated with: the
// configured one, or else the deployment's secret in Redis, stored by the
// first WorkerGateway that needed one (SET NX of a fresh random secret, so that
// all agree) and then kept for the life of g.
func (g *WorkerGateway) leaseSecret(ctx context.Context) ([]byte, error) {
	g.secretMu.Lock()
	defer g.secretMu.Unlock()
	if g.secret != nil {
		return g.secret, nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	s, err := g.rdb.LeaseSecret(ctx, hex.EncodeToString(b[:]))
	if err != nil {
		return nil, err
	}
	if len(s) < MinLeaseSecretLen {
		return nil, fmt.Errorf("dtq: the lease secret stored in Redis (%s) is shorter than %d bytes; delete it or set DTQ_LEASE_SECRET",
			g.rdb.Keys().LeaseSecret(), MinLeaseSecretLen)
	}
	g.secret = []byte(s)
	return g.secret, nil
}

// workerSettings are the settings of a call of worker; claim, when not "",
// also fences it on the nonce of the claim that started the attempt.
func (g *WorkerGateway) workerSettings(worker string, lease time.Duration, claim string) *rdb.WorkerSettings {
	s := g.settings
	s.WorkerID, s.Lease, s.Claim = worker, lease, claim
	return &s
}

func checkLease(d time.Duration) (time.Duration, error) {
	if d == 0 {
		return DefaultRemoteLease, nil
	}
	if d < MinRemoteLease || d > MaxRemoteLease {
		return 0, invalid("lease", "must be between %v and %v, got %v", MinRemoteLease, MaxRemoteLease, d)
	}
	return d, nil
}

func (c *ClaimRequest) validate() error {
	if !validWorkerID(c.WorkerID) {
		return invalid("worker_id", "must be 1..128 characters of A-Z a-z 0-9 _ . : @ -")
	}
	if len(c.Queues) == 0 || len(c.Queues) > MaxClaimQueues {
		return invalid("queues", "must name 1..%d queues", MaxClaimQueues)
	}
	for i, q := range c.Queues {
		if !ValidQueueName(q) {
			return invalid("queues", "queue %q must match ^[a-z0-9][a-z0-9_-]{0,63}$", q)
		}
		if slices.Contains(c.Queues[:i], q) {
			return invalid("queues", "queue %q is named twice", q)
		}
	}
	if c.Max == 0 {
		c.Max = 1
	}
	if c.Max < 1 || c.Max > MaxClaimTasks {
		return invalid("max", "must be between 1 and %d", MaxClaimTasks)
	}
	if c.Wait < 0 || c.Wait > MaxClaimWait {
		return invalid("wait", "must be between 0s and %v", MaxClaimWait)
	}
	var err error
	c.Lease, err = checkLease(c.Lease)
	return err
}

// Claim delivers up to req.Max ready tasks of req.Queues to the remote
// worker, each under a lease of req.Lease, waiting up to req.Wait for a
// first one (a blocking read, never a poll). It answers an empty list when
// nothing came, or when the queues' limits allowed no start within the
// wait. Priorities, limits, pauses and expiry apply exactly as for a Go
// worker. Errors: *ValidationError for a bad request, ErrWorkerIDInUse
// when a live Go worker uses the id, *TooManyWorkersError when the id is new
// and the worker records are at their bound (nothing is claimed).
func (g *WorkerGateway) Claim(ctx context.Context, req ClaimRequest) ([]*LeasedTask, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	s := g.workerSettings(req.WorkerID, req.Lease, "")
	// The secret first: a task must not be claimed without a token to hand.
	secret, err := g.leaseSecret(ctx)
	if err != nil {
		return nil, err
	}
	if err := g.writeWorkerRecord(ctx, rdb.RemoteClaim, req.Key, req.WorkerID, req.Lease, req.Queues, nil); err != nil {
		return nil, err
	}
	targets, err := g.claimTargets(ctx, req.Queues)
	if err != nil {
		return nil, err
	}
	for _, q := range targets {
		g.serviceQueue(q)
	}
	deadline := time.Now().Add(req.Wait)
	var out []*LeasedTask
	for {
		waits := make([]func(context.Context, time.Duration), 0, len(targets))
		for _, q := range targets {
			if len(out) >= req.Max || ctx.Err() != nil {
				break
			}
			tasks, wait, err := g.claimQueue(ctx, q, s, secret, req.Max-len(out), false)
			out = append(out, tasks...)
			if err != nil {
				if len(out) > 0 {
					break // hand over what was claimed; the rest waits
				}
				return nil, err
			}
			if wait != nil {
				waits = append(waits, wait)
			}
		}
		left := time.Until(deadline)
		if len(out) > 0 || left <= 0 || ctx.Err() != nil || len(waits) == 0 {
			break
		}
		g.waitAny(ctx, waits, min(left, idleBlock))
	}
	if len(out) > 0 {
		ids := make([]string, len(out))
		for i, t := range out {
			ids[i] = t.ID
		}
		// The tasks are claimed: a record that failed to update must not
		// lose them, so the error is only logged.
		if err := g.writeWorkerRecord(context.WithoutCancel(ctx), rdb.RemoteBeat, req.Key, req.WorkerID, req.Lease, nil, ids); err != nil {
			g.cfg.Logger.Warn("remote worker record update failed", "worker_id", req.WorkerID, "err", err)
		}
	}
	return out, nil
}

// claimTargets lists the partitions to claim from for queues, in the
// queues' order; a queue's partitions start at a rotating one, so that no
// partition is always tried first.
func (g *WorkerGateway) claimTargets(ctx context.Context, queues []string) ([]string, error) {
	out := make([]string, 0, len(queues))
	for _, q := range queues {
		parts, err := g.rdb.PartitionsOf(ctx, q)
		if err != nil {
			return nil, err
		}
		first := g.spread.Add(1) % uint64(len(parts))
		out = append(out, parts[first:]...)
		out = append(out, parts[:first]...)
	}
	return out, nil
}

// claimQueue claims up to n tasks of queue. With none, it returns how to
// wait for the next chance. regrouped says the groups were just created.
func (g *WorkerGateway) claimQueue(ctx context.Context, queue string, s *rdb.WorkerSettings, secret []byte, n int, regrouped bool) ([]*LeasedTask, func(context.Context, time.Duration), error) {
	bg := context.WithoutCancel(ctx) // a claim is never cut in half
	now, nonce := g.dep.clock(), attempt.NewNonce()
	res, err := attempt.Resend(ctx, s.Lease/2, func() (*rdb.ClaimResult, error) {
		return g.rdb.Claim(bg, queue, s, n, now, nonce)
	})
	if err != nil {
		return nil, nil, err
	}
	out := make([]*LeasedTask, 0, len(res.Tasks))
	until := dtqtype.Time{Time: now.Add(s.Lease).UTC()}
	for _, ct := range res.Tasks {
		out = append(out, newLeasedTask(&ct, s.WorkerID, nonce, secret, until))
	}
	switch {
	case len(out) > 0:
		return out, nil, nil
	case res.NoGroup && !regrouped:
		// The first claim of a queue creates its groups (as a Go worker
		// does at start), then claims again.
		if err := g.rdb.EnsureGroups(bg, queue); err != nil {
			return nil, nil, err
		}
		return g.claimQueue(ctx, queue, s, secret, n, true)
	case res.NoGroup:
		return nil, func(ctx context.Context, d time.Duration) { attempt.Sleep(ctx, d) }, nil
	case res.Limited && res.Wait > 0:
		return nil, func(ctx context.Context, d time.Duration) { attempt.Sleep(ctx, min(d, res.Wait)) }, nil
	case res.Limited:
		return nil, func(ctx context.Context, d time.Duration) { _, _ = g.waiter.Wake(ctx, queue, "$", d) }, nil
	case len(res.LastIDs) > 0:
		return nil, func(ctx context.Context, d time.Duration) { _, _ = g.waiter.ReadyBand(ctx, queue, res.LastIDs, d) }, nil
	}
	return nil, func(ctx context.Context, d time.Duration) { attempt.Sleep(ctx, d) }, nil // paused
}

// waitAny runs the waits at once and returns when the first returns. The
// others end within d on their own (a blocking read is not interrupted);
// Close waits for them.
func (g *WorkerGateway) waitAny(ctx context.Context, waits []func(context.Context, time.Duration), d time.Duration) {
	if len(waits) == 1 {
		waits[0](ctx, d)
		return
	}
	first := make(chan struct{}, len(waits))
	for _, w := range waits {
		g.waiters.Go(func() {
			w(ctx, d)
			first <- struct{}{}
		})
	}
	select {
	case <-first:
	case <-ctx.Done():
	}
}

func newLeasedTask(ct *rdb.ClaimedTask, worker, claim string, secret []byte, until dtqtype.Time) *LeasedTask {
	t := &LeasedTask{
		ID: ct.ID, Queue: queueOf(ct.Queue), Type: ct.Type, Payload: json.RawMessage(ct.Payload), Attempt: ct.Attempt,
		MaxAttempts: ct.MaxAttempts, TimeoutMS: ct.TimeoutMS, Priority: ct.Priority,
		CancelRequested: ct.CancelRequested, LeaseExpiresAt: until, Metadata: json.RawMessage("null"),
	}
	if len(ct.Payload) == 0 {
		t.Payload = json.RawMessage("null")
	}
	if len(ct.Metadata) > 0 {
		t.Metadata = json.RawMessage(ct.Metadata)
	}
	if ct.IdempotencyKey != "" {
		k := ct.IdempotencyKey
		t.IdempotencyKey = &k
	}
	if ct.Workflow != "" {
		t.WorkflowID, t.Ref, t.Deps = ct.Workflow, ct.Ref, json.RawMessage("{}")
		if len(ct.Deps) > 0 {
			t.Deps = json.RawMessage(ct.Deps)
		}
	}
	t.LeaseToken = (&leaseToken{ID: ct.ID, Queue: ct.Queue, Attempt: ct.Attempt, Worker: worker, Claim: claim}).encode(secret)
	return t
}

// NodeLease verifies the lease token of task id and returns the lease it
// names, for Client.AddNodes on behalf of an HTTP worker: a token that is
// not this deployment's, or of another task, is ErrLeaseLost (whether the
// lease is still held, AddNodes checks against Redis).
func (g *WorkerGateway) NodeLease(ctx context.Context, id, token string) (NodeLease, error) {
	t, err := g.verifiedToken(ctx, id, token)
	if err != nil {
		return NodeLease{}, err
	}
	return NodeLease{Queue: t.Queue, TaskID: t.ID, Attempt: t.Attempt, WorkerID: t.Worker, Claim: t.Claim}, nil
}

// writeWorkerRecord updates an HTTP worker's heartbeat record; key names the
// API key of a claim (the per-key bound applies to a new id).
func (g *WorkerGateway) writeWorkerRecord(ctx context.Context, mode, key, worker string, lease time.Duration, queues, ids []string) error {
	now := g.dep.clock()
	err := g.rdb.RemoteWorkerBeat(ctx, &rdb.RemoteWorker{ID: worker, Mode: mode, LeaseEnd: now.Add(lease), Queues: queues,
		Interval: lease / 3, Version: Version, TaskIDs: ids, EventsMax: g.dep.eventsMaxLen, Key: key}, now)
	if errors.Is(err, rdb.ErrDuplicateWorker) {
		return fmt.Errorf("%w: %s", ErrWorkerIDInUse, worker)
	}
	return tooManyWorkers(err)
}

// Renewal is a heartbeat's answer.
type Renewal struct {
	LeaseExpiresAt  dtqtype.Time `json:"lease_expires_at"`
	CancelRequested bool         `json:"cancel_requested"`
}

// Heartbeat renews the lease of task id for lease (0 = DefaultRemoteLease),
// fenced by token, and reports whether a cancel was requested. It fails
// with ErrLeaseLost when the token's attempt no longer owns the task, or the
// token is not one this deployment issued for it (then nothing is written).
func (g *WorkerGateway) Heartbeat(ctx context.Context, id, token string, lease time.Duration) (*Renewal, error) {
	t, err := g.verifiedToken(ctx, id, token)
	if err != nil {
		return nil, err
	}
	if lease, err = checkLease(lease); err != nil {
		return nil, err
	}
	now := g.dep.clock()
	st, err := g.rdb.RenewLeases(ctx, t.Queue, g.workerSettings(t.Worker, lease, t.Claim), now, []rdb.LeaseRef{{ID: id, Attempt: t.Attempt}})
	if err != nil {
		return nil, err
	}
	if len(st) != 1 || st[0] == rdb.LeaseLost {
		return nil, ErrLeaseLost
	}
	if err := g.writeWorkerRecord(ctx, rdb.RemoteBeat, "", t.Worker, lease, nil, []string{id}); err != nil && !errors.Is(err, ErrWorkerIDInUse) {
		g.cfg.Logger.Warn("remote worker record update failed", "worker_id", t.Worker, "err", err)
	}
	return &Renewal{LeaseExpiresAt: dtqtype.Time{Time: now.Add(lease).UTC()}, CancelRequested: st[0] == rdb.CancelRequested}, nil
}

// Complete finalizes task id as succeeded with result (JSON; nil = none),
// fenced by token. A result over ResultMaxBytes is dropped and flagged
// truncated; one nesting deeper than MaxJSONDepth is a *ValidationError
// (field "result") and nothing is written. Sent again after success with the same token it answers nil
// again. It fails with ErrLeaseLost when the attempt no longer owns the
// task, or the token is not one this deployment issued for it; then nothing
// is written.
func (g *WorkerGateway) Complete(ctx context.Context, id, token string, result json.RawMessage) error {
	t, err := g.verifiedToken(ctx, id, token)
	if err != nil {
		return err
	}
	if len(result) > 0 && !json.Valid(result) {
		return invalid("result", "must be valid JSON")
	}
	// Dependants and readers decode the result as stored: it keeps the
	// payload's nesting bound.
	if d := jsonscan.Depth(result); d > MaxJSONDepth {
		return invalid("result", "nests %d levels deep; the limit is %d", d, MaxJSONDepth)
	}
	succ := attempt.Success(id, t.Attempt, result, g.cfg.ResultMaxBytes)
	if string(succ.Result) == "null" {
		succ.Result = nil
	}
	errs, err := g.rdb.FinishSucceeded(context.WithoutCancel(ctx), t.Queue, g.workerSettings(t.Worker, g.cfg.VisibilityTimeout, t.Claim),
		g.dep.clock(), []rdb.Success{succ})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		return ErrLeaseLost
	}
	g.recordFinished(ctx, t.Worker, id)
	return nil
}

// Failure is a remote worker's report of a failed attempt.
type Failure struct {
	// Class is the error_class, default "Error"; Message the
	// error_message (one line, at most 500 characters kept).
	Class, Message string
	// Retryable: the task is tried again (while attempts remain). A
	// permanent failure is dead-lettered (or failed with the DLQ off).
	Retryable bool
	// RetryAfter, when positive, replaces the backoff before the next
	// attempt.
	RetryAfter time.Duration
}

// Fail finalizes task id's attempt as failed, fenced by token: retrying
// (backoff or f.RetryAfter) while retryable with attempts left (the task's
// max_attempts in Redis decides), else dead-lettered (failed with the DLQ
// off). A task with a cancel request ends cancelled instead. Sent again
// with the same token it answers as the first time. It fails with
// ErrLeaseLost when the attempt no longer owns the task, or the token is
// not one this deployment issued for it; then nothing is written.
func (g *WorkerGateway) Fail(ctx context.Context, id, token string, f Failure) error {
	t, err := g.verifiedToken(ctx, id, token)
	if err != nil {
		return err
	}
	if f.Class == "" {
		f.Class = "Error"
	}
	if len(f.Class) > 128 || !validWorkerID(f.Class) {
		return invalid("error.class", "must be 1..128 characters of A-Z a-z 0-9 _ . : @ -")
	}
	if f.RetryAfter < 0 || f.RetryAfter > 365*24*time.Hour {
		return invalid("retry_after", "must be a duration between 0s and 8760h")
	}
	// The worker's own verdict; max_attempts is the task hash's, so a retry
	// of a task whose attempts ran out is dead-lettered on its script's
	// refusal (which wrote nothing).
	d := attempt.Decide(&attempt.End{Attempt: t.Attempt, Failed: true, Permanent: !f.Retryable, Class: f.Class,
		Message: oneLine(f.Message, maxErrorMessage), RetryAfter: f.RetryAfter, HasRetryAfter: f.RetryAfter > 0},
		g.retryPolicy(), mrand.Float64())
	// The scripts ack the band the task hash records and, for a retry,
	// check its max_attempts: neither comes from the worker.
	a := &rdb.FinishArgs{Queue: t.Queue, ID: id, Attempt: t.Attempt, Now: g.dep.clock(), CheckAttempts: true}
	s := g.workerSettings(t.Worker, g.cfg.VisibilityTimeout, t.Claim)
	bg := context.WithoutCancel(ctx)
	err = attempt.WriteFailure(bg, g.rdb, a, s, &d)
	if errors.Is(err, rdb.ErrAttemptsExhausted) {
		d = d.Exhausted()
		err = attempt.WriteFailure(bg, g.rdb, a, s, &d)
	}
	switch {
	case errors.Is(err, rdb.ErrLeaseLost):
		return ErrLeaseLost
	case err != nil && !errors.Is(err, rdb.ErrCancelWon):
		return err
	}
	g.recordFinished(ctx, t.Worker, id)
	return nil
}

// recordFinished drops a finished task from its worker's record.
func (g *WorkerGateway) recordFinished(ctx context.Context, worker, id string) {
	if err := g.writeWorkerRecord(context.WithoutCancel(ctx), rdb.RemoteDone, "", worker, g.cfg.VisibilityTimeout, nil, []string{id}); err != nil &&
		!errors.Is(err, ErrWorkerIDInUse) {
		g.cfg.Logger.Warn("remote worker record update failed", "worker_id", worker, "err", err)
	}
}

// maxServicedQueues bounds the queues one WorkerGateway services (three
// background loops each): claims of further queues work, but their expired leases come
// back only through another process that services them.
const maxServicedQueues = 1024

// serviceQueue notes that queue was claimed from, starting its maintenance
// when Run runs.
func (g *WorkerGateway) serviceQueue(queue string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.serviced[queue] {
		return
	}
	if len(g.serviced) >= maxServicedQueues {
		if !g.servicedFull {
			g.servicedFull = true
			g.cfg.Logger.Warn("HTTP workers claim from more queues than this API process services; expired leases of the others are not reclaimed here",
				"limit", maxServicedQueues, "queue", queue)
		}
		return
	}
	g.serviced[queue] = true
	if g.startServicing != nil {
		g.startServicing(queue)
	}
}

// Run keeps the queues claimed from through g serviced until ctx ends:
// expired leases come back (queued with attempt +1, or dead-lettered with
// no attempts left), due retries are promoted and overdue tasks expired,
// exactly as a Go worker serving them would. Any number of API processes
// may run it at once. It returns when ctx ends and its loops stopped.
func (g *WorkerGateway) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.startServicing != nil {
		g.mu.Unlock()
		return errors.New("dtq: WorkerGateway.Run is already running")
	}
	g.startServicing = func(queue string) { g.startMaintenance(ctx, queue) }
	for q := range g.serviced {
		g.startMaintenance(ctx, q)
	}
	g.mu.Unlock()
	<-ctx.Done()
	g.loops.Wait()
	g.waiters.Wait()
	g.mu.Lock()
	g.startServicing = nil
	g.mu.Unlock()
	return nil
}

// startMaintenance starts queue's reclaimer, promoter and sweeper; g.mu is
// held.
func (g *WorkerGateway) startMaintenance(ctx context.Context, queue string) {
	mcfg := maintenance.Config{RDB: g.rdb, Settings: &g.settings, Clock: g.dep.clock, Logger: g.cfg.Logger}
	g.loops.Add(3)
	go func() {
		defer g.loops.Done()
		maintenance.Run(ctx, maintenance.Service{Name: "reclaim", Queue: queue, Logger: g.cfg.Logger,
			MaxSleep: g.cfg.HeartbeatInterval, Step: g.reclaimStep(queue)})
	}()
	go func() { defer g.loops.Done(); maintenance.RunPromoter(ctx, mcfg, queue) }()
	go func() { defer g.loops.Done(); maintenance.RunSweeper(ctx, mcfg, queue) }()
}

// reclaimStep returns expired leases of queue to their band stream. It
// takes nothing over (no runner): this process runs no handlers, so the next
// claim, remote or Go, delivers them with attempt +1.
func (g *WorkerGateway) reclaimStep(queue string) func(context.Context) (maintenance.Result, error) {
	return attempt.Reclaim{RDB: g.rdb, Queue: queue, Settings: &g.settings, Clock: g.dep.clock, Logger: g.cfg.Logger,
		Every: g.cfg.HeartbeatInterval, Window: g.cfg.VisibilityTimeout / 2}.Step()
}

// retryPolicy is the backoff of remote workers' retryable failures.
func (g *WorkerGateway) retryPolicy() attempt.Policy {
	return attempt.Policy{Base: g.cfg.RetryBaseDelay, Max: g.cfg.RetryMaxDelay, Jitter: g.cfg.RetryJitter}
}

// Close waits for the background waits of claims that returned and closes
// their connections; call it after the HTTP server stopped.
func (g *WorkerGateway) Close() {
	g.waiters.Wait()
	_ = g.waiter.Close()
}
