// Package schedule parses schedule specs (docs/schedules.md) and computes their
// ticks. It is pure: no Redis, no clock of its own; every function takes
// the time it works from, so tests can pin it.
//
// Two kinds of spec are accepted:
//
//   - "@every <duration>": a Go duration of at least 1s. Its ticks are the
//     multiples of the duration counted from the Unix epoch, so every
//     process computes the same ticks without talking to the others
//     ("@every 1m" ticks on each whole minute, "@every 1h" on each whole
//     hour UTC). The timezone does not matter for it.
//   - five-field cron ("minute hour day-of-month month day-of-week") or one
//     of @hourly, @daily (@midnight), @weekly, @monthly, @yearly
//     (@annually), read by github.com/robfig/cron/v3 in the schedule's
//     timezone. Across DST changes the parser's rules hold: a wall time
//     that does not exist that day (spring forward) does not fire that day,
//     and a wall time that happens twice (fall back) fires at both
//     occurrences, which are different instants.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	// Timezones must resolve the same on every host, including minimal
	// containers without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest "@every" interval.
const MinEvery = time.Second

// Error is an invalid spec or timezone; Field is the JSON field to blame
// ("spec" or "timezone").
type Error struct {
	Field   string
	Message string
}

// Error names the field and what is wrong with it.
func (e *Error) Error() string { return e.Field + ": " + e.Message }

// Spec is a parsed schedule spec. The zero value is not valid; use Parse.
type Spec struct {
	every time.Duration      // > 0 for "@every"
	cron  *cron.SpecSchedule // otherwise
	loc   *time.Location
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads spec in timezone tz (an IANA name; "" means UTC).
func Parse(spec, tz string) (Spec, error) {
	if tz == "" {
		tz = "UTC"
	}
	// time.LoadLocation also accepts "Local" and file paths; neither is a
	// timezone every process agrees on.
	if tz == "Local" || strings.HasPrefix(tz, "/") || strings.Contains(tz, "..") {
		return Spec{}, &Error{Field: "timezone", Message: fmt.Sprintf("%q is not an IANA timezone name like \"Europe/Paris\" or \"UTC\"", tz)}
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return Spec{}, &Error{Field: "timezone", Message: fmt.Sprintf("%q is not an IANA timezone name like \"Europe/Paris\" or \"UTC\"", tz)}
	}
	s := strings.TrimSpace(spec)
	if s == "" {
		return Spec{}, &Error{Field: "spec", Message: `is required: "@every 1m", a five-field cron expression like "*/5 * * * *", or @hourly/@daily/@weekly/@monthly/@yearly`}
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return Spec{}, &Error{Field: "spec", Message: "must not carry a timezone; set the timezone field instead"}
	}
	if rest, ok := strings.CutPrefix(s, "@every"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			return Spec{}, &Error{Field: "spec", Message: fmt.Sprintf("%q: @every takes a Go duration such as \"@every 30s\" or \"@every 1h30m\"", spec)}
		}
		if d < MinEvery {
			return Spec{}, &Error{Field: "spec", Message: fmt.Sprintf("%q: the interval must be at least 1s", spec)}
		}
		if d%time.Millisecond != 0 {
			return Spec{}, &Error{Field: "spec", Message: fmt.Sprintf("%q: the interval must be a whole number of milliseconds", spec)}
		}
		return Spec{every: d, loc: loc}, nil
	}
	sched, err := parser.Parse(s)
	if err != nil {
		return Spec{}, &Error{Field: "spec", Message: fmt.Sprintf("%q is not a valid schedule (%v); use \"@every 1m\", five cron fields \"minute hour day-of-month month day-of-week\" like \"0 9 * * 1-5\", or @hourly/@daily/@weekly/@monthly/@yearly", spec, err)}
	}
	cs, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return Spec{}, &Error{Field: "spec", Message: fmt.Sprintf("%q is not a supported schedule", spec)}
	}
	cs.Location = loc // descriptors come back in time.Local
	out := Spec{cron: cs, loc: loc}
	if out.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		// The parser answers zero for a date that never comes (Feb 30).
		return Spec{}, &Error{Field: "spec", Message: fmt.Sprintf("%q never fires (no such date)", spec)}
	}
	return out, nil
}

// Every returns the interval of an "@every" spec, 0 for cron.
func (s Spec) Every() time.Duration { return s.every }

// Next returns the first tick strictly after t, or the zero time when there
// is none (a cron date that never comes).
func (s Spec) Next(t time.Time) time.Time {
	if s.every > 0 {
		d := s.every.Milliseconds()
		ms := t.UnixMilli()
		next := (floorDiv(ms, d) + 1) * d
		return time.UnixMilli(next).UTC()
	}
	if s.cron == nil {
		return time.Time{}
	}
	n := s.cron.Next(t.In(s.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// lookBack are the windows Latest searches, shortest first: the first one
// that holds a tick bounds how many ticks Latest steps through.
var lookBack = []time.Duration{
	2 * time.Minute, 2 * time.Hour, 2 * 24 * time.Hour, 32 * 24 * time.Hour,
	367 * 24 * time.Hour, 5 * 367 * 24 * time.Hour,
}

// errNoTick is returned by Latest when no tick lies in the range.
var errNoTick = errors.New("no tick")

// Latest returns the last tick at or before now that is not before
// notBefore: the one tick to fire after any number of missed ones. ok is
// false when no tick lies in [notBefore, now].
func (s Spec) Latest(now, notBefore time.Time) (time.Time, bool) {
	t, err := s.latest(now)
	if err != nil || t.Before(notBefore) {
		return time.Time{}, false
	}
	return t, true
}

func (s Spec) latest(now time.Time) (time.Time, error) {
	if s.every > 0 {
		d := s.every.Milliseconds()
		return time.UnixMilli(floorDiv(now.UnixMilli(), d) * d).UTC(), nil
	}
	for _, w := range lookBack {
		t := s.Next(now.Add(-w))
		if t.IsZero() || t.After(now) {
			continue
		}
		for {
			n := s.Next(t)
			if n.IsZero() || n.After(now) {
				return t, nil
			}
			t = n
		}
	}
	return time.Time{}, errNoTick
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
