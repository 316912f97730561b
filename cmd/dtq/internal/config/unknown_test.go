package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnknownVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ []string
		want    []UnknownVariable
	}{
		{"none", []string{"HOME=/root", "DTQ_REDIS_URL=redis://x", "DTQ_TOKEN=t", "DTQ_API_URL=http://x"}, nil},
		{"test switches", []string{"DTQ_TEST_REDIS_ADDR=x", "DTQ_FAULT_ADDR=y", "DTQ_SKIP_BROWSER_TESTS=1"}, nil},
		{"intent", []string{"DTQ_LOG_FORMAT=json"}, []UnknownVariable{{"DTQ_LOG_FORMAT", "DTQ_LOG_JSON"}}},
		{"typo", []string{"DTQ_REDIS_ULR=redis://x"}, []UnknownVariable{{"DTQ_REDIS_ULR", "DTQ_REDIS_URL"}}},
		{"missing suffix", []string{"DTQ_VISIBILITY_TIMEOUT=30"}, []UnknownVariable{{"DTQ_VISIBILITY_TIMEOUT", "DTQ_VISIBILITY_TIMEOUT_S"}}},
		{"cli typo", []string{"DTQ_TOKN=x"}, []UnknownVariable{{"DTQ_TOKN", "DTQ_TOKEN"}}},
		{"nothing close", []string{"DTQ_FROBNICATE_EVERYTHING=1"}, []UnknownVariable{{"DTQ_FROBNICATE_EVERYTHING", ""}}},
		{"no value", []string{"DTQ_CONCURRENCY"}, []UnknownVariable{{"DTQ_CONCURRENCY", "DTQ_WORKER_CONCURRENCY"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, UnknownVariables(tt.environ))
		})
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"REDIS_ULR", "REDIS_URL", 2}, {"kitten", "sitting", 3}} {
		require.Equal(t, tt.want, editDistance(tt.a, tt.b), "%s/%s", tt.a, tt.b)
	}
}
