package jsonscan

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoneSurrogate finds surrogate escapes not in a high-low pair, and
// only those: decoding turns each into U+FFFD, so "\ud800" and "\udbff"
// would otherwise share an idempotency fingerprint.
func TestLoneSurrogate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		json string
		at   int
	}{
		{`{"s":"\ud800"}`, 6},
		{`{"s":"\udbff"}`, 6},
		{`{"s":"\udc00"}`, 6},
		{`{"s":"\uDFFF"}`, 6},
		{`{"s":"x\ud83d"}`, 7},
		{`{"s":"\ud83d\u0041"}`, 6},
		{`{"s":"\ud83d\ud83d"}`, 6},
		{`{"s":"\ud83d\ude00\ud800"}`, 18},
		{`{"s":"\\\ud800"}`, 8},
		{`{"s":"\ud83d"`, 6},
		{`{"s":"\ud83d\u"}`, 6},
		{`{"s":"\ud83d\ude00"}`, -1},
		{`{"s":"\uD83D\uDE00"}`, -1},
		{`{"s":"\\ud800"}`, -1}, // an escaped backslash, then text
		{`{"s":"\u00e9\n\"\\"}`, -1},
		{`{"s":"plain"}`, -1},
		{`{"s":"\u12"}`, -1}, // not JSON: left to the decoder
		{`{"s":"\`, -1},
		{``, -1},
	}
	for _, tt := range tests {
		require.Equal(t, tt.at, LoneSurrogate([]byte(tt.json)), tt.json)
	}
}
