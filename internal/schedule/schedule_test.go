package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		spec, tz, field, contains string
	}{
		{"", "", "spec", "is required"},
		{"   ", "", "spec", "is required"},
		{"@every", "", "spec", "Go duration"},
		{"@every1m", "", "spec", "Go duration"},
		{"@every 500ms", "", "spec", "at least 1s"},
		{"@every -1m", "", "spec", "at least 1s"},
		{"@every soon", "", "spec", "Go duration"},
		{"* * * *", "", "spec", "not a valid schedule"},
		{"* * * * * *", "", "spec", "not a valid schedule"},
		{"61 * * * *", "", "spec", "not a valid schedule"},
		{"0 9 * * mon-xyz", "", "spec", "not a valid schedule"},
		{"@sometimes", "", "spec", "not a valid schedule"},
		{"0 0 30 2 *", "", "spec", "never fires"},
		{"CRON_TZ=Europe/Paris 0 9 * * *", "", "spec", "timezone field"},
		{"TZ=UTC 0 9 * * *", "", "spec", "timezone field"},
		{"0 9 * * *", "Mars/Olympus", "timezone", "IANA"},
		{"0 9 * * *", "Local", "timezone", "IANA"},
		{"0 9 * * *", "/etc/localtime", "timezone", "IANA"},
		{"0 9 * * *", "../../etc/x", "timezone", "IANA"},
	}
	for _, c := range cases {
		_, err := Parse(c.spec, c.tz)
		require.Error(t, err, "%q in %q", c.spec, c.tz)
		var se *Error
		require.ErrorAs(t, err, &se)
		require.Equal(t, c.field, se.Field, "%q", c.spec)
		require.Contains(t, se.Message, c.contains, "%q", c.spec)
	}
}

func TestNextAndLatest(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v.UTC()
	}
	at := func(loc *time.Location, y int, mo time.Month, d, h, mi int) time.Time {
		return time.Date(y, mo, d, h, mi, 0, 0, loc).UTC()
	}
	cases := []struct {
		name     string
		spec, tz string
		from     time.Time
		next     []time.Time // successive Next from `from`
	}{
		{"every second", "@every 1s", "", utc("2024-05-01T10:00:00.400Z"),
			[]time.Time{utc("2024-05-01T10:00:01Z"), utc("2024-05-01T10:00:02Z")}},
		{"every minute is on the minute", "@every 1m", "", utc("2024-05-01T10:00:30Z"),
			[]time.Time{utc("2024-05-01T10:01:00Z"), utc("2024-05-01T10:02:00Z")}},
		{"every 90 minutes from the epoch", "@every 90m", "Europe/Paris", utc("2024-05-01T00:10:00Z"),
			[]time.Time{utc("2024-05-01T01:30:00Z"), utc("2024-05-01T03:00:00Z")}},
		{"every 1.5s", "@every 1.5s", "", utc("2024-05-01T10:00:00Z"),
			[]time.Time{utc("2024-05-01T10:00:01.5Z"), utc("2024-05-01T10:00:03Z")}},
		{"five minutes", "*/5 * * * *", "", utc("2024-05-01T10:02:00Z"),
			[]time.Time{utc("2024-05-01T10:05:00Z"), utc("2024-05-01T10:10:00Z")}},
		{"at a tick, Next moves on", "*/5 * * * *", "", utc("2024-05-01T10:05:00Z"),
			[]time.Time{utc("2024-05-01T10:10:00Z")}},
		{"weekdays at nine in Paris (summer, UTC+2)", "0 9 * * 1-5", "Europe/Paris", utc("2024-06-07T12:00:00Z"), // a Friday
			[]time.Time{at(paris, 2024, 6, 10, 9, 0), at(paris, 2024, 6, 11, 9, 0)}},
		{"nine in Paris is 07:00 UTC in summer, 08:00 in winter", "0 9 * * *", "Europe/Paris", utc("2024-10-26T12:00:00Z"),
			[]time.Time{utc("2024-10-27T08:00:00Z"), utc("2024-10-28T08:00:00Z")}},
		{"spring forward: 02:30 does not exist on 31 March", "30 2 * * *", "Europe/Paris", utc("2024-03-30T12:00:00Z"),
			[]time.Time{at(paris, 2024, 4, 1, 2, 30), at(paris, 2024, 4, 2, 2, 30)}},
		{"fall back: 02:30 happens twice on 27 October", "30 2 * * *", "Europe/Paris", utc("2024-10-26T12:00:00Z"),
			[]time.Time{utc("2024-10-27T00:30:00Z"), utc("2024-10-27T01:30:00Z"), utc("2024-10-28T01:30:00Z")}},
		{"hourly across fall back: 24 distinct instants plus one", "0 * * * *", "Europe/Paris", utc("2024-10-26T23:30:00Z"),
			[]time.Time{utc("2024-10-27T00:00:00Z"), utc("2024-10-27T01:00:00Z"), utc("2024-10-27T02:00:00Z")}},
		{"@daily in New York", "@daily", "America/New_York", utc("2024-01-01T12:00:00Z"),
			[]time.Time{at(ny, 2024, 1, 2, 0, 0), at(ny, 2024, 1, 3, 0, 0)}},
		{"@daily in New York across spring forward", "@daily", "America/New_York", utc("2024-03-09T12:00:00Z"),
			[]time.Time{utc("2024-03-10T05:00:00Z"), utc("2024-03-11T04:00:00Z")}},
		{"leap day", "0 0 29 2 *", "", utc("2024-03-01T00:00:00Z"),
			[]time.Time{utc("2028-02-29T00:00:00Z")}},
		{"timezone default is UTC", "0 9 * * *", "", utc("2024-06-01T10:00:00Z"),
			[]time.Time{utc("2024-06-02T09:00:00Z")}},
	}
	for _, c := range cases {
		s, err := Parse(c.spec, c.tz)
		require.NoError(t, err, c.name)
		cur := c.from
		for i, want := range c.next {
			got := s.Next(cur)
			require.True(t, want.Equal(got), "%s: tick %d: want %s, got %s", c.name, i, want, got)
			// Latest at the tick is the tick; a moment before it is the one before.
			l, ok := s.Latest(got, time.Time{})
			require.True(t, ok)
			require.True(t, got.Equal(l), "%s: Latest(%s) = %s", c.name, got, l)
			if i > 0 {
				l, ok = s.Latest(got.Add(-time.Millisecond), time.Time{})
				require.True(t, ok)
				require.True(t, cur.Equal(l), "%s: Latest before tick %d = %s, want %s", c.name, i, l, cur)
			}
			cur = got
		}
	}
}

// After downtime only the latest missed tick is due, however many were
// missed; ticks before notBefore (already fired) are never due again.
func TestLatestAfterDowntime(t *testing.T) {
	t.Parallel()
	base := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		spec      string
		now       time.Time
		notBefore time.Time
		want      time.Time
		ok        bool
	}{
		{"@every 1s", base.Add(7*24*time.Hour + 300*time.Millisecond), base, base.Add(7 * 24 * time.Hour), true},
		{"* * * * *", base.Add(3*24*time.Hour + 90*time.Second), base, base.Add(3*24*time.Hour + time.Minute), true},
		{"0 9 * * 1-5", time.Date(2024, 5, 6, 8, 0, 0, 0, time.UTC), base, time.Date(2024, 5, 3, 9, 0, 0, 0, time.UTC), true},
		{"0 0 1 1 *", time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC), base, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"*/5 * * * *", base.Add(4 * time.Minute), base.Add(time.Second), time.Time{}, false},
		{"*/5 * * * *", base.Add(5 * time.Minute), base.Add(time.Second), base.Add(5 * time.Minute), true},
	}
	for _, c := range cases {
		s, err := Parse(c.spec, "")
		require.NoError(t, err)
		got, ok := s.Latest(c.now, c.notBefore)
		require.Equal(t, c.ok, ok, c.spec)
		require.True(t, c.want.Equal(got), "%s: want %s, got %s", c.spec, c.want, got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"@every 1m", "*/5 * * * *", "0 9 * * 1-5", "@daily", "0 0 30 2 *", "@every 1.5s"} {
		f.Add(s, "Europe/Paris")
	}
	f.Fuzz(func(t *testing.T, spec, tz string) {
		s, err := Parse(spec, tz)
		if err != nil {
			var se *Error
			require.ErrorAs(t, err, &se)
			return
		}
		from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		n := s.Next(from)
		require.True(t, n.After(from))
		l, ok := s.Latest(n, from)
		require.True(t, ok)
		require.True(t, n.Equal(l))
	})
}
