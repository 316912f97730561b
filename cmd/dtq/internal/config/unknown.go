package config

import (
	"slices"
	"strings"
)

// otherVariables are DTQ_* names read by something other than Load: the
// CLI's client settings, and the repository's own test and benchmark
// switches. They are not reported as unknown.
var otherVariables = []string{"DTQ_API_URL", "DTQ_TOKEN", "DTQ_SKIP_BROWSER_TESTS", "DTQ_SCRIPT_COST_DUMPS"}

// otherPrefixes are families of test and benchmark switches.
var otherPrefixes = []string{"DTQ_TEST_", "DTQ_FAULT_", "DTQ_BENCH_"}

// intents maps names people reach for to the variable that does it.
var intents = map[string]string{
	"LOG_FORMAT":    "LOG_JSON",
	"JSON_LOGS":     "LOG_JSON",
	"LOG":           "LOG_LEVEL",
	"REDIS":         "REDIS_URL",
	"REDIS_ADDR":    "REDIS_URL",
	"REDIS_HOST":    "REDIS_URL",
	"REDIS_ADDRESS": "REDIS_URL",
	"ADDR":          "API_ADDR",
	"LISTEN_ADDR":   "API_ADDR",
	"PORT":          "API_ADDR",
	"CONCURRENCY":   "WORKER_CONCURRENCY",
	"QUEUE":         "QUEUES",
	"PREFIX":        "KEY_PREFIX",
}

// UnknownVariable is a DTQ_* environment variable that no part of dtq
// reads, with the variable it was probably meant to be.
type UnknownVariable struct {
	Name       string // e.g. DTQ_LOG_FORMAT
	Suggestion string // e.g. DTQ_LOG_JSON; "" when nothing is close
}

// UnknownVariables returns the DTQ_* names in environ (os.Environ's
// "NAME=value" form) that dtq does not read, in the order given, each with
// a did-you-mean suggestion when one is close.
func UnknownVariables(environ []string) []UnknownVariable {
	known := Names()
	var out []UnknownVariable
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || slices.Contains(known, name) || slices.Contains(otherVariables, name) {
			continue
		}
		if slices.ContainsFunc(otherPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		out = append(out, UnknownVariable{Name: name, Suggestion: suggest(name, append(known, otherVariables[:2]...))})
	}
	return out
}

// suggest returns the known name closest to name: an intent from the
// table, else the nearest by edit distance when the distance is small
// against the name's length.
func suggest(name string, known []string) string {
	bare := strings.TrimPrefix(strings.ToUpper(name), EnvPrefix)
	if to, ok := intents[bare]; ok {
		return EnvPrefix + to
	}
	best, bestD := "", 0
	for _, k := range known {
		d := editDistance(bare, strings.TrimPrefix(k, EnvPrefix))
		if best == "" || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD <= max(2, len(bare)/3) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b (bytes: the
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
