package idemkey

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want string
		problem  string // "" when the key is valid
	}{
		{"abc", "abc", ""},
		{`"abc"`, "abc", ""},
		{`"a\"b"`, `a"b`, ""},
		{`"a\\b"`, `a\b`, ""},
		{`"say \"hi\""`, `say "hi"`, ""},
		{`"a\b"`, "", "is not a valid quoted string"}, // RFC 8941 allows only \" and \\ escapes
		{`"a"b"`, "", "is not a valid quoted string"},
		{`""`, "", "must be 1..255 characters"},
		{`"`, `"`, ""},
		{`"abc`, `"abc`, ""},
		{`abc"`, `abc"`, ""},
		{" padded ", " padded ", ""},
		{"", "", "must be 1..255 characters"},
		{strings.Repeat("k", 255), strings.Repeat("k", 255), ""},
		{strings.Repeat("k", 256), "", "must be 1..255 characters"},
		{`"` + strings.Repeat("k", 255) + `"`, strings.Repeat("k", 255), ""},
		{"tab\t", "", "must be printable ASCII (0x20..0x7e)"},
		{"del\x7f", "", "must be printable ASCII (0x20..0x7e)"},
		{"caf\u00e9", "", "must be printable ASCII (0x20..0x7e)"},
		{"{queue}", "{queue}", ""},
	}
	for _, c := range cases {
		got, err := Normalize(c.in, 255)
		if c.problem != "" {
			require.EqualError(t, err, c.problem, "%q", c.in)
			continue
		}
		require.NoError(t, err, "%q", c.in)
		require.Equal(t, c.want, got, "%q", c.in)
	}
}
