package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
)

// dedupCase is one way of deduplicating the submissions of the dedup
// scenario (docs/deduplication.md).
type dedupCase struct {
	name string
	mode dtq.DedupMode // "" = no dedup spec at all
	// small: the submissions share -dedup-keys keys, round robin; else
	// every submission has a key of its own.
	small bool
	what  string
}

// dedupCases are the dedup scenario's cases, in the order its table has
// them.
var dedupCases = []dedupCase{
	{"none", "", false, "no dedup spec"},
	{"drop-distinct", dtq.DedupDrop, false, "drop, a key per submission: every one creates (the check alone)"},
	{"drop-small", dtq.DedupDrop, true, "drop over K keys: all but the first K collapse"},
	{"debounce-small", dtq.DedupDebounce, true, "debounce (window 1m) over K keys: all but the first K rewrite the waiting task"},
	{"replace-small", dtq.DedupReplace, true, "replace over K keys: all but the first K cancel the key's queued task and create"},
}

// dedupWindow is debounce's window in the dedup scenario: long enough that
// no task of a run leaves its wait (no worker runs anyway).
const dedupWindow = time.Minute

// checkDedupFlags checks one case's flags before a redis-server starts.
func checkDedupFlags(name string, n, keys int) error {
	dc, ok := findDedupCase(name)
	switch {
	case !ok:
		return fmt.Errorf("unknown -dedup-case %q: none, drop-distinct, drop-small, debounce-small or replace-small", name)
	case dc.small && (keys < 1 || keys > n):
		return fmt.Errorf("-dedup-keys must be between 1 and -n (%d)", n)
	}
	return nil
}

func findDedupCase(name string) (dedupCase, bool) {
	for _, c := range dedupCases {
		if c.name == name {
			return c, true
		}
	}
	return dedupCase{}, false
}

// dedupBench submits n tasks from producers goroutines the way the named
// case says, each with its own idempotency key when idem is set, and
// checks that Redis decided each as the case expects (with K keys: K
// created, n-K collapsed or replacing). Like enqueue, but every submission
// carries the case's dedup spec.
func dedupBench(ctx context.Context, rc *redis.Client, name string, n, producers, keys int, idem bool, payload any) result {
	dc, _ := findDedupCase(name)
	c := newClient(rc)
	_, _ = c.Submit(ctx, dtq.Submission{Type: "warmup", Payload: payload}) // register the queue
	var created, collapsed, replaced atomic.Int64
	r := measureEnqueue(ctx, rc, n, producers, "", func(i int64) error {
		s := dtq.Submission{Type: "noop", Payload: payload}
		if idem {
			s.IdempotencyKey = "order-" + strconv.FormatInt(i, 10)
		}
		if dc.mode != "" {
			k := i
			if dc.small {
				k = i % int64(keys)
			}
			s.Dedup = &dtq.Dedup{Key: "k-" + strconv.FormatInt(k, 10), Mode: dc.mode}
			if dc.mode == dtq.DedupDebounce {
				s.Dedup.Window = dedupWindow
			}
		}
		res, err := c.Submit(ctx, s)
		if err != nil {
			return err
		}
		switch {
		case res.Deduplicated != "":
			collapsed.Add(1)
		case res.Replaced != "":
			replaced.Add(1)
			created.Add(1)
		default:
			created.Add(1)
		}
		return nil
	})
	// What each case must have done: a wrong count means the run did not
	// measure what its name says.
	want := [3]int64{int64(n), 0, 0} // created, collapsed, replaced
	if dc.small {
		k := int64(keys)
		switch dc.mode {
		case dtq.DedupDrop, dtq.DedupDebounce:
			want = [3]int64{k, int64(n) - k, 0}
		case dtq.DedupReplace:
			want = [3]int64{int64(n), 0, int64(n) - k}
		}
	}
	if got := [3]int64{created.Load(), collapsed.Load(), replaced.Load()}; got != want {
		panic(fmt.Sprintf("dedup case %s: created, collapsed, replaced = %v, want %v", name, got, want))
	}
	r.Note = fmt.Sprintf("case=%s producers=%d idempotency=%t keys=%d created=%d collapsed=%d replaced=%d",
		name, producers, idem, keys, created.Load(), collapsed.Load(), replaced.Load())
	if !dc.small {
		r.Note = fmt.Sprintf("case=%s producers=%d idempotency=%t created=%d", name, producers, idem, created.Load())
	}
	return r
}

// dedupTable runs every dedup case with 1 and 16 producers, without and
// with an idempotency key, runs times each (in rounds: every combination
// once, then again, so that a change in the machine's load falls on all of
// them alike), each run in a fresh process with its own redis-server, and
// prints the medians. One producer submits n/5 tasks, as in -compare.
func dedupTable(runs, n, keys int) int {
	type combo struct {
		dc        dedupCase
		producers int
		idem      bool
	}
	var combos []combo
	for _, producers := range []int{1, 16} {
		for _, idem := range []bool{false, true} {
			for _, dc := range dedupCases {
				combos = append(combos, combo{dc, producers, idem})
			}
		}
	}
	results := make([][]result, len(combos))
	for range runs {
		for i, cb := range combos {
			tasks := n
			if cb.producers == 1 {
				tasks = n / 5
			}
			args := []string{"-scenario", "dedup", "-dedup-case", cb.dc.name, "-producers", strconv.Itoa(cb.producers),
				"-n", strconv.Itoa(tasks), "-dedup-keys", strconv.Itoa(keys), "-listpack-value", "64"}
			if cb.idem {
				args = append(args, "-idem")
			}
			r, err := runOnce(args)
			if err != nil {
				fmt.Fprintln(os.Stderr, cb.dc.name, err)
				return 1
			}
			b, _ := json.Marshal(r)
			fmt.Fprintln(os.Stderr, string(b))
			results[i] = append(results[i], r)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tproducers\tidempotency key\tsubmits/s\tvs none\tcmds/call\tredis µs/call\tbytes/call\truns (submits/s)\t")
	var none float64
	for i, cb := range combos {
		m := median(results[i])
		if cb.dc.mode == "" {
			none = m.PerSecond
		}
		rates := make([]float64, len(results[i]))
		for j, r := range results[i] {
			rates[j] = r.PerSecond
		}
		slices.Sort(rates)
		runsText := ""
		for j, v := range rates {
			if j > 0 {
				runsText += " · "
			}
			runsText += strconv.FormatFloat(v, 'f', 0, 64)
		}
		fmt.Fprintf(tw, "%s\t%d\t%t\t%.0f\t%+.1f%%\t%.1f\t%.1f\t%.0f\t%s\t\n", cb.dc.name, cb.producers, cb.idem,
			m.PerSecond, (m.PerSecond/none-1)*100, m.CmdsPerTask, m.CPUusPerTask, m.BytesPerTask, runsText)
	}
	tw.Flush()
	fmt.Printf("\nK = %d keys. Medians of %d runs.\n", keys, runs)
	for _, dc := range dedupCases {
		fmt.Printf("  %-15s %s\n", dc.name, dc.what)
	}
	return 0
}
