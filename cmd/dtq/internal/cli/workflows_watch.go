package cli

import (
	"bytes"
	"context"
	"os"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
)

// clearScreen moves the cursor home and clears the terminal (ANSI), so
// that a redraw replaces the view in place.
const clearScreen = "\x1b[H\x1b[2J"

// isTerminal reports whether the command's stdout is a terminal that
// understands ANSI redraws (not TERM=dumb).
func isTerminal(e *env) bool {
	f, ok := e.stdout.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	term, _ := e.lookupEnv("TERM")
	return term != "dumb"
}

// workflowWatch follows one workflow until it ends (`workflows get
// --watch`).
type workflowWatch struct {
	s        *session
	id       string
	interval time.Duration // the longest time between two reads
	nodes    bool          // the node table too, in redraws
	redraw   bool          // a terminal: redraw the view at each change
	now      func() time.Time
}

// run reads the workflow at once, then long-polls it (each read holds up
// to interval at the API, answered at once when the workflow ends) and
// shows each change, until the workflow ended or ctx did (errInterrupted).
func (v *workflowWatch) run(ctx context.Context) error {
	if v.now == nil {
		v.now = time.Now
	}
	var last *workflowView
	for {
		began := time.Now()
		wait := v.interval
		if last == nil {
			wait = 0 // show where it stands at once
		}
		res, err := v.s.api.do(ctx, workflowRequest(v.id, wait))
		if err != nil {
			if ctx.Err() != nil {
				return errInterrupted
			}
			return err
		}
		var w workflowView
		if err := decodeAnswer(res.body, &w); err != nil {
			return err
		}
		if err := v.show(last, &w, res.body); err != nil {
			return err
		}
		last = &w
		if w.Status.Terminal() {
			return nil
		}
		// The API holds a read until the workflow ends or the wait ran out;
		// should it answer early anyway, do not ask again at once.
		if rest := v.interval - time.Since(began); wait > 0 && rest > 0 {
			select {
			case <-ctx.Done():
				return errInterrupted
			case <-time.After(rest):
			}
		}
	}
}

// show prints w as read after last (nil: the first read).
func (v *workflowWatch) show(last, w *workflowView, body []byte) error {
	p := v.s.out
	var changes []string
	if last != nil {
		changes = workflowChanges(last, w)
		if len(changes) == 0 {
			return nil
		}
	}
	switch {
	case p.json:
		return p.line(body)
	case v.redraw:
		// The whole view at once, so that it does not flicker.
		var buf bytes.Buffer
		buf.WriteString(clearScreen)
		if err := printWorkflow(&printer{w: &buf}, w, v.nodes); err != nil {
			return err
		}
		if !w.Status.Terminal() {
			buf.WriteString("\nwatching: redrawn at each change; Ctrl-C stops\n")
		}
		_, err := p.w.Write(buf.Bytes())
		return err
	case last == nil:
		return printWorkflow(p, w, v.nodes)
	}
	at := v.now().UTC().Format(dtqtype.TimeLayout)
	if last.Status == w.Status || !w.Status.Terminal() {
		for _, c := range changes {
			if err := p.textf("%s  %s", at, c); err != nil {
				return err
			}
		}
		return nil
	}
	// Its end: the node changes, then the status line as get prints it.
	for _, c := range changes[1:] {
		if err := p.textf("%s  %s", at, c); err != nil {
			return err
		}
	}
	return p.textf("%s  %s", at, workflowStatusLine(w))
}
