package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/events"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/cmd/dtq/internal/web"
	"github.com/dtq-io/dtq/examples"
	"github.com/dtq-io/dtq/internal/redistest"
)

// The browser aborts page loads when the host's network interfaces change,
// as the partition suite's network namespaces do: HostNetwork keeps the
// two packages from running at once.
func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m, redistest.After(closeBrowser), redistest.HostNetwork(false)))
}

// chromiumPath is Debian's Chromium, which CI installs.
const chromiumPath = "/usr/bin/chromium"

// The browser is shared by every test of the package; each test gets its
// own tab (and its own server, so its own origin and session storage).
var browserState struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		// A missing browser is a failure, not a quiet skip, unless the
		// person running the tests says so explicitly.
		if os.Getenv("DTQ_SKIP_BROWSER_TESTS") != "" {
			t.Skipf("DTQ_SKIP_BROWSER_TESTS is set and Chromium is missing at %s", chromiumPath)
		}
		t.Fatalf("browser tests need Chromium at %s (apt-get install chromium, as .ci/run does; or set DTQ_SKIP_BROWSER_TESTS=1 to skip them): %v", chromiumPath, err)
	}
	b := &browserState
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "dtq-web-chromium-")
		if err != nil {
			b.err = err
			return
		}
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(chromiumPath),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-gpu", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.Flag("disable-extensions", true),
			chromedp.Flag("disable-default-apps", true),
			chromedp.Flag("disable-background-timer-throttling", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
			chromedp.Flag("hide-scrollbars", true),
			chromedp.Flag("force-color-profile", "srgb"),
			chromedp.WindowSize(1280, 900),
			chromedp.UserDataDir(dir),
		)
		ctx, cancelBrowser := chromedp.NewContext(allocCtx)
		b.ctx = ctx
		b.cancel = func() {
			cancelBrowser()
			cancelAlloc()
			// The tests are over by now: a profile left in the temp
			// directory fails none of them.
			_ = os.RemoveAll(dir)
		}
		b.err = chromedp.Do(ctx) // starts the browser
	})
	if b.err != nil {
		t.Fatalf("starting Chromium: %v", b.err)
	}
	return b.ctx
}

func closeBrowser() {
	if browserState.cancel != nil {
		browserState.cancel()
	}
}

// --- the server under test ------------------------------------------------

// Test API keys (secrets) for servers started with keys.
const (
	readerKey = "reader-secret-1"
	adminKey  = "admin-secret-1"
)

type options struct {
	keys     bool           // require API keys (otherwise open mode)
	queues   map[string]int // served by the worker; default "default" and "emails"
	ringSize int            // events kept in memory per queue by the feed; 0 = default
	gate     *feedGate      // lets the test cut the event feed
}

// bundle is a dashboard test's world: the dashboard and the API of a real
// server over real Redis, with a worker running the example handlers.
type bundle struct {
	url    string
	rc     *redis.Client
	prefix string
	http   *http.Client
	key    string // sent by the test's own API calls

	ctx context.Context // ends when the test ends
	wg  *sync.WaitGroup // background goroutines to wait for
}

func setup(t *testing.T, o options) *bundle {
	t.Helper()
	s := redistest.New(t)
	rc, prefix := s.Client, s.Prefix
	d := openDeployment(t, rc, prefix)
	client, err := d.NewClient(nil)
	require.NoError(t, err)
	insp := d.Inspector()
	admin, err := d.NewAdmin(&dtq.AdminConfig{Client: client})
	require.NoError(t, err)
	var keys []httpapi.APIKey
	if o.keys {
		keys = []httpapi.APIKey{
			{Role: httpapi.RoleReader, Name: "viewer", Secret: readerKey},
			{Role: httpapi.RoleAdmin, Name: "ops", Secret: adminKey},
		}
	}
	hub, err := events.NewHub(rc, prefix, &events.Config{PollInterval: 50 * time.Millisecond,
		Block: 200 * time.Millisecond, RingSize: o.ringSize})
	require.NoError(t, err)
	var feed httpapi.EventFeed = hub
	if o.gate != nil {
		feed = gatedFeed{hub, o.gate}
	}
	gateway, err := d.NewWorkerGateway(&dtq.WorkerGatewayConfig{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	api, err := httpapi.New(httpapi.Config{Client: client, Inspector: insp, Admin: admin, WorkerGateway: gateway, Keys: keys, Events: feed})
	require.NoError(t, err)

	// The dashboard next to the API, as the API server mounts it.
	mux := http.NewServeMux()
	mux.Handle("/", web.Handler())
	mux.Handle("/api/", api)
	mux.Handle("/ws/", api)
	mux.Handle("GET /health", api)
	mux.Handle("GET /ready", api)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close) // after the hub stopped, which ends the streams

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	wg.Go(func() {
		if err := hub.Run(ctx); err != nil {
			t.Errorf("hub: %v", err)
		}
	})
	wg.Go(func() {
		if err := gateway.Run(ctx); err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	b := &bundle{url: srv.URL, rc: rc, prefix: prefix, http: srv.Client(), ctx: ctx, wg: &wg}
	if o.keys {
		b.key = adminKey
	}
	queues := o.queues
	if queues == nil {
		queues = map[string]int{"default": 2, "emails": 1}
	}
	b.startWorker(t, "worker-"+prefix, queues)
	return b
}

// startWorker runs a worker with the example handlers until the test ends
// (or stop is called).
func (b *bundle) startWorker(t *testing.T, id string, queues map[string]int) (stop func()) {
	t.Helper()
	d := openDeployment(t, b.rc, b.prefix)
	w, err := d.NewWorker(&dtq.WorkerConfig{
		Queues: queues, Concurrency: 4, WorkerID: id,
		HeartbeatInterval: time.Second, VisibilityTimeout: 5 * time.Second,
		RetryBaseDelay: 200 * time.Millisecond, RetryMaxDelay: time.Second, DrainTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	examples.Register(w.ServeMux, d, b.rc)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	b.wg.Go(func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			t.Errorf("worker %s: %v", id, err)
		}
	})
	return func() {
		cancel()
		<-done
	}
}

// feedGate stands between the browser and the event feed: the test can cut
// every open stream and refuse new ones for a while, as a network outage
// or a restarting server would.
type feedGate struct {
	mu      sync.Mutex
	held    bool
	open    map[*http.Request]context.CancelFunc
	resumed []string // Last-Event-ID of each connection that sent one
}

func newFeedGate() *feedGate { return &feedGate{open: map[*http.Request]context.CancelFunc{}} }

// gatedFeed is the hub's feed behind a gate.
type gatedFeed struct {
	hub  *events.Hub
	gate *feedGate
}

func (f gatedFeed) ServeSSE(w http.ResponseWriter, r *http.Request) {
	f.gate.wrap(f.hub.ServeSSE)(w, r)
}

func (f gatedFeed) ServeWS(w http.ResponseWriter, r *http.Request) { f.hub.ServeWS(w, r) }

func (g *feedGate) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		if g.held {
			g.mu.Unlock()
			http.Error(w, "feed unavailable", http.StatusServiceUnavailable)
			return
		}
		if id := r.Header.Get("Last-Event-ID"); id != "" {
			g.resumed = append(g.resumed, id)
		}
		ctx, cancel := context.WithCancel(r.Context())
		g.open[r] = cancel
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			delete(g.open, r)
			g.mu.Unlock()
			cancel()
		}()
		h(w, r.WithContext(ctx))
	}
}

// hold ends every open stream and refuses new ones until release.
func (g *feedGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = true
	for _, cancel := range g.open {
		cancel()
	}
}

func (g *feedGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = false
}

// resumes returns how many connections resumed with a Last-Event-ID.
func (g *feedGate) resumes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.resumed)
}

// call sends a request to the API as the test (admin key when keys are on)
// and decodes the JSON answer into out, if given. It returns the status.
func (b *bundle) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.key != "" {
		req.Header.Set("Authorization", "Bearer "+b.key)
	}
	res, err := b.http.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	if out != nil && res.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(data, out), string(data))
	}
	return res.StatusCode
}

// task is the part of a task answer tests look at.
type task struct {
	TaskID           string `json:"task_id"`
	Status           string `json:"status"`
	Queue            string `json:"queue"`
	PreviousAttempts int    `json:"previous_attempts"`
}

// submit posts one task through the API and returns it.
func (b *bundle) submit(t *testing.T, body string) task {
	t.Helper()
	var tk task
	require.Equal(t, http.StatusAccepted, b.call(t, http.MethodPost, "/api/v1/tasks", body, &tk))
	return tk
}

func (b *bundle) task(t *testing.T, id string) task {
	t.Helper()
	var tk task
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/api/v1/tasks/"+id, "", &tk))
	return tk
}

// waitStatus polls the API until the task has the status.
func (b *bundle) waitStatus(t *testing.T, id, status string) task {
	t.Helper()
	var last task
	require.Eventually(t, func() bool {
		last = b.task(t, id)
		return last.Status == status
	}, 20*time.Second, 25*time.Millisecond, "task %s never became %s", id, status)
	return last
}

// --- the tab --------------------------------------------------------------

// tab is one browser tab showing the dashboard of a bundle. It records
// what the page writes to the console.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// actionTimeout bounds each browser step; a step that waits for the page
// gives up after it.
const actionTimeout = 20 * time.Second

func newTab(t *testing.T, b *bundle) *tab {
	t.Helper()
	return newTabSized(t, b, 0, 0)
}

// newTabSized opens a tab with a viewport of width × height (0 = the
// window's).
func newTabSized(t *testing.T, b *bundle, width, height int64) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t))
	var done sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		done.Wait()
	})
	require.NoError(t, chromedp.Do(ctx)) // opens the tab with no deadline
	tb := &tab{t: t, ctx: ctx, base: b.url}
	msgs := chromedp.Console(ctx)
	done.Go(func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.console = append(tb.console, m)
			tb.mu.Unlock()
		}
	})
	if width > 0 {
		tb.do(chromedp.EmulateViewport(width, height))
	}
	return tb
}

func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	require.NoError(tb.t, chromedp.Do(ctx, actions...))
}

// eval returns the value of a JavaScript expression.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(tb.t, err, expr)
	return v
}

// evalVoid runs a JavaScript statement.
func evalVoid(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](expr)
}

// waitFor polls a JavaScript condition in the page until it is true.
func (tb *tab) waitFor(cond string) {
	tb.t.Helper()
	tb.waitForWithin(cond, actionTimeout)
}

// waitForWithin is waitFor with its own timeout, for a change the page
// only picks up at its periodic refresh (15 to 20 s when no event says so).
func (tb *tab) waitForWithin(cond string, timeout time.Duration) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, timeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!(`+cond+`)`,
		chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		tb.t.Fatalf("waiting for %s: %v\npage: %s\nconsole:\n%s", cond, err, tb.pageState(), tb.consoleText())
	}
}

// pageState describes what a failed wait may hinge on: the page, the
// confirmation dialog, the notices shown and the focused element.
func (tb *tab) pageState() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		page: document.querySelector('main')?.dataset.page,
		dialog: {open: document.querySelector('#confirm')?.open, value: document.querySelector('#confirm')?.returnValue},
		toasts: [...document.querySelectorAll('.toast')].map(e => e.textContent),
		focus: document.activeElement?.id || document.activeElement?.tagName})`))
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return v
}

// open loads the dashboard at a route ("/", "/queues", "/tasks/<id>").
func (tb *tab) open(route string) {
	tb.t.Helper()
	tb.do(chromedp.Navigate(tb.base + "/#" + route))
}

// goTo moves to another route inside the loaded page, as a link would.
func (tb *tab) goTo(route string) {
	tb.t.Helper()
	tb.do(evalVoid(fmt.Sprintf(`location.hash = %q`, "#"+route)))
}

// waitPage waits until page finished its first load.
func (tb *tab) waitPage(page string) {
	tb.t.Helper()
	tb.waitFor(fmt.Sprintf(`document.querySelector('main[data-page=%q][data-ready="true"]')`, page))
}

// click clicks the first element matching a CSS selector. A page that
// renders again between finding the element and clicking it (live updates
// replace nodes) leaves chromedp holding a node that is gone: the click is
// tried again on the element that replaced it, as a person's click would.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil || try == 5 || !strings.Contains(err.Error(), "Could not find node with given id") {
			require.NoError(tb.t, err, "click %s", sel)
			return
		}
	}
}

// signIn fills the sign-in form with key.
func (tb *tab) signIn(key string) {
	tb.t.Helper()
	tb.waitPage("signin")
	tb.do(chromedp.SendKeys(chromedp.CSS("#signin-key"), key), chromedp.Click(chromedp.CSS("#signin-submit")))
}

// problems returns the console errors, warnings and uncaught exceptions.
func (tb *tab) problems() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, m := range tb.console {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
			out = append(out, fmt.Sprintf("%s (%s:%d)", m.String(), m.URL, m.Line+1))
		}
	}
	return out
}

func (tb *tab) consoleText() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var sb strings.Builder
	for _, m := range tb.console {
		fmt.Fprintf(&sb, "  %s\n", m.String())
	}
	return sb.String()
}
