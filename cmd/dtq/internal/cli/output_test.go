package cli

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// hostileText is text a client may send (a log line, an error message, a
// name) that would drive a terminal, with how the CLI shows it.
var hostileText = []struct{ name, in, want string }{
	{"plain", "plain text", "plain text"},
	{"valid UTF-8 unchanged", "é 日本語 ✓ 🙂 עברית العربية", "é 日本語 ✓ 🙂 עברית العربية"},
	{"backslash unchanged", `C:\temp\x1b`, `C:\temp\x1b`},
	{"ESC title", "\x1b]0;pwned\x07rest", `\x1b]0;pwned\x07rest`},
	{"clear screen", "\x1b[2J\x1b[Hgone", `\x1b[2J\x1b[Hgone`},
	{"colour", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
	{"OSC 8 link", "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\", `\x1b]8;;https://evil.example/\x1b\click\x1b]8;;\x1b\`},
	{"CR overwrites", "ok\rFAILED", `ok\rFAILED`},
	{"embedded newline forges a line", "a\n2026-12-07T00:00:00Z  #1  forged", `a\n2026-12-07T00:00:00Z  #1  forged`},
	{"tab", "a\tb", `a\tb`},
	{"NUL, BEL, backspace, DEL", "\x00\x07\x08\x7f", `\x00\x07\x08\x7f`},
	{"C1 CSI and NEL", "\u009b31m\u0085x", `\u009b31m\u0085x`},
	{"line separator", "a\u2028b", `a\u2028b`},
	{"bidi override", "abc\u202edcba\u202c", `abc\u202edcba\u202c`},
	{"bidi isolate", "\u2066x\u2069", `\u2066x\u2069`},
	{"not UTF-8", "a\x9b31mb\xff", `a\x9b31mb\xff`},
}

func TestVisible(t *testing.T) {
	t.Parallel()
	for _, tt := range hostileText {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, visible(tt.in))
		})
	}
}

func TestCellEscapes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "-", cell(""))
	require.Equal(t, `two\nlines\tand a tab`, cell("two\nlines\tand a tab"))
	require.Equal(t, `\x1b[2J`, cell("\x1b[2J"))
}

// TestPrintLogItemEscapes checks that `dtq tasks logs [-f]` shows a log
// line's control sequences escaped on one line, and that -o json prints the
// line exactly.
func TestPrintLogItemEscapes(t *testing.T) {
	t.Parallel()
	for _, tt := range hostileText {
		if !utf8.ValidString(tt.in) {
			continue // JSON carries UTF-8 only
		}
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, err := json.Marshal(map[string]any{"attempt": 2, "ts": "2026-12-07T10:00:00.000Z", "line": tt.in})
			require.NoError(t, err)

			var text bytes.Buffer
			require.NoError(t, printLogItem(&printer{w: &text}, raw))
			require.Equal(t, "2026-12-07T10:00:00.000Z  #2  "+tt.want+"\n", text.String())

			var js bytes.Buffer
			require.NoError(t, printLogItem(&printer{w: &js, json: true}, raw))
			var back struct {
				Line string `json:"line"`
			}
			require.NoError(t, json.Unmarshal(js.Bytes(), &back))
			require.Equal(t, tt.in, back.Line, "-o json is exact")
		})
	}
}
