package rdb

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

// Whether a master keeps the append-only file is read with CONFIG GET, else
// INFO persistence; a master that refuses both is reported as unknown.
func TestDurabilityWarnings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		deny bool   // connect as a user refused CONFIG and INFO
		want string // a warning containing it; "" none about the file
	}{
		{"config, aof on", []string{"--appendonly", "yes"}, false, ""},
		{"config, aof off", nil, false, "without the append-only file"},
		{"config disabled, aof on", []string{"--appendonly", "yes", "--rename-command", "CONFIG", ""}, false, ""},
		{"config disabled, aof off", []string{"--rename-command", "CONFIG", ""}, false, "without the append-only file"},
		{"config and info refused", []string{"--appendonly", "yes"}, true, "is unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, err := redistest.Start(tc.args...)
			require.NoError(t, err)
			t.Cleanup(srv.Stop)
			c := srv.Client(t)
			if tc.deny {
				require.NoError(t, c.Do(context.Background(), "ACL", "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all", "-config", "-info").Err())
				c = redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "limited", Password: "pw"})
				t.Cleanup(func() { c.Close() })
			}
			r := New(c, "d")
			require.Empty(t, r.DurabilityWarnings(context.Background()), "acknowledgements off: nothing to warn about")
			r.SetReplicaAcks(1, 0)
			warn := r.DurabilityWarnings(context.Background())
			var aof []string
			for _, w := range warn {
				if strings.Contains(w, "append-only") {
					aof = append(aof, w)
				}
			}
			if tc.want == "" {
				require.Empty(t, aof)
			} else {
				require.Len(t, aof, 1)
				require.Contains(t, aof[0], tc.want)
			}
		})
	}
}
