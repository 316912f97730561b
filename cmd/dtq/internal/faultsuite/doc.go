// Package faultsuite holds dtq's fault tests (in its _test files): real
// worker and API code against a real redis-server, with a fault-injecting
// proxy (internal/faultproxy) between them, under load. Each scenario checks
// that every acknowledged task reaches exactly one terminal state, that a
// handler that returned success while holding its lease ends succeeded,
// that nothing is left stuck, and that workers and the API recover by
// themselves; each prints one FAULT line with its figures. The workflow
// scenarios (workflow_test.go) check that every workflow ends, no node is
// stranded, every dependant is released once and every submission is
// answered truly. The deduplication scenarios (dedup_test.go) check that
// every answer names a task of its key, that no drop key has two live
// tasks, no keep_last key two running and no replace a running one
// cancelled, that throttle and debounce keep their times, and that no key
// record is left behind. See docs/reliability.md.
package faultsuite
