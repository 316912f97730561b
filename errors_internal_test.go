package dtq

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// QuotaError is a named error type: its name is its error class.
type QuotaError struct{ Limit int }

func (e *QuotaError) Error() string { return fmt.Sprintf("quota of %d exceeded", e.Limit) }

// ValueError is a named error used by value.
type ValueError string

func (e ValueError) Error() string { return string(e) }

type lowerError struct{}

func (lowerError) Error() string { return "unexported" }

type classy struct{ class string }

func (c classy) Error() string      { return "classy" }
func (c classy) ErrorClass() string { return c.class }

func TestErrorClass(t *testing.T) {
	t.Parallel()
	quota := &QuotaError{Limit: 3}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"errors.New", errors.New("x"), "Error"},
		{"fmt.Errorf", fmt.Errorf("x %d", 1), "Error"},
		{"fmt.Errorf wrapping", fmt.Errorf("wrap: %w", quota), "Error"},
		{"context error", context.DeadlineExceeded, "Error"},
		{"unexported type", lowerError{}, "Error"},
		{"nil", nil, "Error"},
		{"named pointer type", quota, "QuotaError"},
		{"named value type", ValueError("v"), "ValueError"},
		{"stdlib named type", &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}, "PathError"},
		{"permanent unwraps", Permanent(quota), "QuotaError"},
		{"retry after unwraps", RetryAfter(time.Second, quota), "QuotaError"},
		{"nested markers unwrap", Permanent(RetryAfter(time.Second, Permanent(quota))), "QuotaError"},
		{"permanent of anonymous", Permanent(errors.New("x")), "Error"},
		{"retry after nil error", RetryAfter(time.Second, nil), "Error"},
		{"ErrorClass method", classy{"RateLimited"}, "RateLimited"},
		{"ErrorClass method wrapped", fmt.Errorf("ctx: %w", classy{"RateLimited"}), "RateLimited"},
		{"ErrorClass method under markers", Permanent(RetryAfter(time.Second, classy{"Deep"})), "Deep"},
		{"Typed decode failure", typedDecodeError(t), "PayloadDecode"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, errorClass(c.err), c.name)
	}
}

func typedDecodeError(t *testing.T) error {
	h := Typed(func(context.Context, *Task, struct{ N int }) (any, error) { return nil, nil })
	_, err := h.ProcessTask(context.Background(), &Task{Payload: []byte(`{"N":"x"}`)})
	require.Error(t, err)
	return err
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 600)
	wide := strings.Repeat("é", 600)   // 2 bytes each
	wider := strings.Repeat("日本", 300) // 3 bytes each
	cases := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"plain", "boom", 500, "boom"},
		{"empty", "", 500, ""},
		{"newlines and tabs", "line1\nline2\r\n\tx", 500, "line1 line2   x"},
		{"nul and escape", "a\x00b\x1bc\x7fd", 500, "a b c d"},
		{"C1 control", "a\u0085b", 500, "a b"},
		{"invalid UTF-8", "a\xffb", 500, "a b"},
		{"ASCII cut at 500", long, 500, long[:500]},
		{"two-byte runes cut by runes", wide, 500, strings.Repeat("é", 500)},
		{"three-byte runes cut by runes", wider, 3, "日本日"},
		{"exactly n", "abc", 3, "abc"},
		{"keeps printable unicode", "naïve ✓ 🚀", 500, "naïve ✓ 🚀"},
	}
	for _, c := range cases {
		got := oneLine(c.in, c.n)
		require.Equal(t, c.want, got, c.name)
		require.True(t, utf8.ValidString(got), c.name)
		require.LessOrEqual(t, utf8.RuneCountInString(got), c.n, c.name)
		require.NotContains(t, got, "\n", c.name)
	}
	require.Equal(t, maxErrorMessage, utf8.RuneCountInString(oneLine(wide, maxErrorMessage)))
}
