package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/dtqtype"
)

// printer writes a command's answer: an aligned table for people, or the
// API's JSON for programs.
type printer struct {
	w    io.Writer
	json bool
}

// raw prints a JSON answer exactly as the API gave it, indented.
func (p *printer) raw(body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		return fmt.Errorf("the API answered invalid JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := p.w.Write(buf.Bytes())
	return err
}

// items prints list items as one JSON array.
func (p *printer) items(items []json.RawMessage) error {
	if items == nil {
		items = []json.RawMessage{}
	}
	b, err := json.Marshal(items)
	if err != nil {
		return err
	}
	return p.raw(b)
}

// line prints one compact JSON value on its own line (streams: events,
// watch).
func (p *printer) line(v []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return fmt.Errorf("the API sent invalid JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := p.w.Write(buf.Bytes())
	return err
}

// textf prints a line of text in table mode.
func (p *printer) textf(format string, args ...any) error {
	_, err := fmt.Fprintf(p.w, format+"\n", args...)
	return err
}

// table prints rows under a header, columns aligned with two spaces.
func (p *printer) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
	if _, err := fmt.Fprintln(tw, strings.Join(header, "\t")); err != nil {
		return err
	}
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = cell(c)
		}
		if _, err := fmt.Fprintln(tw, strings.Join(cells, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// fields prints name/value pairs, one a line, values aligned.
func (p *printer) fields(kv [][2]string) error {
	tw := tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
	for _, f := range kv {
		if _, err := fmt.Fprintf(tw, "%s:\t%s\n", f[0], cell(f[1])); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// cell makes a value safe for one table cell: "-" when empty, else the
// value as visible shows it (tabs and line breaks escaped too, so a cell
// stays one cell on one line).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return visible(s)
}

// visible is text from a client (a log line, an error message, metadata,
// a name) as the CLI prints it for people: what a terminal would act on
// rather than show is escaped, so a person sees that it was there and a
// stray sequence can neither retitle, clear or recolour the terminal, hide
// a link (OSC 8), overwrite a line (CR) nor forge one (LF). Escaped are the
// C0 and C1 control characters and DEL (as \n, \r, \t, \xNN or \u00NN),
// and the Unicode line separators and bidirectional overrides (\uNNNN),
// which can reorder or split what is shown. Everything else, any valid
// UTF-8 included, passes unchanged; a byte that is not UTF-8 is shown as
// \xNN. Backslashes are not doubled: the text is for reading, and -o json
// prints it exactly.
func visible(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, escaped) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if r == utf8.RuneError && n == 1 {
			// Not UTF-8: the byte, shown rather than left to a terminal
			// that might read it as a C1 control.
			fmt.Fprintf(&b, `\x%02x`, s[i-1])
			continue
		}
		if !escaped(r) {
			b.WriteRune(r)
			continue
		}
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// escaped reports whether visible escapes r: a control character, a line
// or paragraph separator, or a bidirectional embedding, override or
// isolate.
func escaped(r rune) bool {
	switch {
	case unicode.IsControl(r): // C0, DEL, C1
		return true
	case r == '\u2028', r == '\u2029':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// truncate shortens s to n characters, marking the cut with "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// compactJSON is v on one line; "" for a missing or null value.
func compactJSON(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return string(v)
	}
	return buf.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// optInt is a nullable number: "" when absent.
func optInt(n *int64) string {
	if n == nil {
		return ""
	}
	return itoa(*n)
}

// nextPageHint tells, on stderr, how to read the next page of a list.
func nextPageHint(w io.Writer, command, cursor string) {
	if cursor != "" {
		notef(w, "more results: %s --cursor %s (or --all)", command, cursor)
	}
}

// notef prints a note for people, prefixed "dtq: ", on w: the command's
// stderr. It is best-effort: when stderr fails there is nowhere left to
// report that, and the answer on stdout and the exit code stand as they are.
func notef(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, "dtq: "+format+"\n", args...)
}

// listing is one list command: what to fetch and how a row looks.
type listing[T any] struct {
	path   string
	query  url.Values
	all    bool   // follow next_cursor to the end
	hint   string // the command named in the next-page hint; "" = none
	header []string
	row    func(T) []string
}

// printList fetches a list and prints it: the API's items as a JSON array
// with -o json, else a table with one row per item.
func printList[T any](cmd *cobra.Command, r *remote, l listing[T]) error {
	s, err := r.open(cmd)
	if err != nil {
		return err
	}
	defer s.close()
	items, next, err := s.api.listPages(cmd.Context(), l.path, l.query, l.all)
	if err != nil {
		return err
	}
	if l.hint != "" {
		defer nextPageHint(r.e.stderr, l.hint, next)
	}
	if s.out.json {
		return s.out.items(items)
	}
	rows := make([][]string, 0, len(items))
	for _, raw := range items {
		var v T
		if err := decodeAnswer(raw, &v); err != nil {
			return err
		}
		rows = append(rows, l.row(v))
	}
	return s.out.table(l.header, rows)
}

// listCmd makes a list command that takes no argument and no flag of its
// own, as cmd describes it: it prints the list l fetches.
func listCmd[T any](r *remote, cmd *cobra.Command, l listing[T]) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error { return printList(cmd, r, l) })
	return cmd
}

// wireTime shows a time exactly as the API writes it ("" when unset).
func wireTime(t dtqtype.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(dtqtype.TimeLayout)
}

// optString shows an optional string ("" when unset).
func optString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
