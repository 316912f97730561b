package config_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url   string
		check func(t *testing.T, o *config.RedisOptions)
	}{
		{"redis://127.0.0.1:6379/0", func(t *testing.T, o *config.RedisOptions) {
			require.Equal(t, config.RedisStandalone, o.Mode)
			require.Equal(t, "127.0.0.1:6379", o.Standalone.Addr)
			require.Equal(t, 0, o.Standalone.DB)
			require.Nil(t, o.Standalone.TLSConfig)
		}},
		{"rediss://u:p%40ss@cache.example:6380/2?dial_timeout=3s", func(t *testing.T, o *config.RedisOptions) {
			require.Equal(t, "cache.example:6380", o.Standalone.Addr)
			require.Equal(t, 2, o.Standalone.DB)
			require.Equal(t, "u", o.Standalone.Username)
			require.Equal(t, "p@ss", o.Standalone.Password)
			require.NotNil(t, o.Standalone.TLSConfig)
			require.Equal(t, 3*time.Second, o.Standalone.DialTimeout)
		}},
		{"unix:///run/redis.sock?db=3", func(t *testing.T, o *config.RedisOptions) {
			require.Equal(t, "unix", o.Standalone.Network)
			require.Equal(t, "/run/redis.sock", o.Standalone.Addr)
			require.Equal(t, 3, o.Standalone.DB)
		}},
		{"redis+sentinel://s1:26379,s2:26380,s3/mymaster/1", func(t *testing.T, o *config.RedisOptions) {
			require.Equal(t, config.RedisSentinel, o.Mode)
			require.Equal(t, "mymaster", o.Failover.MasterName)
			require.Equal(t, []string{"s1:26379", "s2:26380", "s3:26379"}, o.Failover.SentinelAddrs)
			require.Equal(t, 1, o.Failover.DB)
			require.Nil(t, o.Failover.TLSConfig)
		}},
		{"rediss+sentinel://:pw@[::1]:26379/primary?pool_size=50", func(t *testing.T, o *config.RedisOptions) {
			require.Equal(t, "primary", o.Failover.MasterName)
			require.Equal(t, []string{"[::1]:26379"}, o.Failover.SentinelAddrs)
			require.Equal(t, "pw", o.Failover.SentinelPassword)
			require.Equal(t, "pw", o.Failover.Password, "the sentinel password also opens the master")
			require.Equal(t, 50, o.Failover.PoolSize)
			require.NotNil(t, o.Failover.TLSConfig)
		}},
		{"redis+sentinel://:spw@s1/m?password=mpw", func(t *testing.T, o *config.RedisOptions) {
			require.Equal(t, "spw", o.Failover.SentinelPassword)
			require.Equal(t, "mpw", o.Failover.Password)
		}},
		{"redis+cluster://u:p@n1:7000,n2:7001,n3", func(t *testing.T, o *config.RedisOptions) {
			require.Equal(t, config.RedisCluster, o.Mode)
			require.Equal(t, []string{"n1:7000", "n2:7001", "n3:6379"}, o.Cluster.Addrs)
			require.Equal(t, "u", o.Cluster.Username)
			require.Equal(t, "p", o.Cluster.Password)
			require.Nil(t, o.Cluster.TLSConfig)
		}},
		{"rediss+cluster://n1:7000/0?read_timeout=2s", func(t *testing.T, o *config.RedisOptions) {
			require.NotNil(t, o.Cluster.TLSConfig)
			require.Equal(t, 2*time.Second, o.Cluster.ReadTimeout)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			o, err := config.ParseRedisURL(tt.url)
			require.NoError(t, err)
			tt.check(t, o)
			o.MinPoolSize(80)
			c := o.NewClient()
			require.NoError(t, c.Close())
		})
	}
}

func TestParseRedisURLErrors(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"", "127.0.0.1:6379", "http://x", "redis://host:notaport",
		"redis+sentinel://s1", "redis+sentinel://s1/m/x", "redis+sentinel://s1/m/1/2", "redis+sentinel://,s1/m",
		"redis+sentinel://s1:99999/m", "redis+cluster://n1/5", "redis+cluster://n1?bogus_option=1",
	} {
		_, err := config.ParseRedisURL(u)
		require.Error(t, err, u)
		require.Contains(t, err.Error(), "must be a Redis URL", u)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://user:secret@h:1/0", "redis://user:xxxxx@h:1/0"},
		{"redis://:secret@h", "redis://:xxxxx@h"},
		{"redis://user@h", "redis://user@h"},
		{"redis+sentinel://:a@b@s1,s2/m?password=pw&pool_size=3", "redis+sentinel://:xxxxx@s1,s2/m?password=xxxxx&pool_size=3"},
		{"user:secret@host", "(unparsable URL)"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, config.RedactURL(tt.in), tt.in)
	}
}

func TestNewRedisClient(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	c, err := config.NewRedisClient(srv.URL())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Ping(context.Background()).Err())
	_, ok := c.(*redis.Client)
	require.True(t, ok)

	_, err = config.NewRedisClient("nope")
	require.Error(t, err)
}

func FuzzParseRedisURL(f *testing.F) {
	for _, s := range []string{"redis://h:1/0", "redis+sentinel://a:1,b/m/2?x=1", "redis+cluster://u:p@a,b:3", "rediss://[::1]:1", "unix:///s", "redis://u:fuzzsecret@h/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := config.ParseRedisURL(s)
		if err == nil && o == nil {
			t.Fatal("nil options without an error")
		}
		if r := config.RedactURL(s); strings.Contains(s, "://u:fuzzsecret@") && strings.Contains(r, "fuzzsecret@") {
			t.Fatalf("RedactURL(%q) = %q keeps the password", s, r)
		}
	})
}
