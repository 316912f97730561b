package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisMode is the kind of Redis deployment a URL names.
type RedisMode int

// Redis deployment kinds.
const (
	RedisStandalone RedisMode = iota // redis://, rediss://, unix://
	RedisSentinel                    // redis+sentinel://, rediss+sentinel://
	RedisCluster                     // redis+cluster://, rediss+cluster://
)

// RedisOptions are the client options a Redis URL describes; the field that
// matches Mode is set and the others are nil.
type RedisOptions struct {
	Mode       RedisMode
	Standalone *redis.Options
	Failover   *redis.FailoverOptions
	Cluster    *redis.ClusterOptions
}

const redisURLForms = "must be a Redis URL: redis://[user:password@]host:port/db, rediss://… (TLS), " +
	"redis+sentinel://[user:password@]host:port,host2:port/master/db or " +
	"redis+cluster://[user:password@]host:port,host2:port"

// ParseRedisURL parses DTQ_REDIS_URL. The forms are:
//
//	redis://[user:password@]host:port[/db][?options]       one server
//	rediss://…                                            the same over TLS
//	unix://[user:password@]/path/to/redis.sock[?db=N]     a Unix socket
//	redis+sentinel://[user:password@]host:port,host2:port/master[/db][?options]
//	redis+cluster://[user:password@]host:port,host2:port[?options]
//
// rediss+sentinel:// and rediss+cluster:// use TLS. Options are go-redis's
// URL query options (dial_timeout=3s, pool_size=50, …). For Sentinel, the
// user and password authenticate to the sentinels and, unless
// ?username=/?password= are given, to the master too.
func ParseRedisURL(s string) (*RedisOptions, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, errors.New(redisURLForms)
	}
	fail := func(err error) (*RedisOptions, error) {
		if uerr, ok := errors.AsType[*url.Error](err); ok {
			err = uerr.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("%s (%w)", redisURLForms, err)
	}
	switch scheme {
	case "redis", "rediss", "unix":
		o, err := redis.ParseURL(s)
		if err != nil {
			return fail(err)
		}
		return &RedisOptions{Mode: RedisStandalone, Standalone: o}, nil
	case "redis+sentinel", "rediss+sentinel":
		o, err := parseSentinel(strings.TrimSuffix(scheme, "+sentinel"), rest)
		if err != nil {
			return fail(err)
		}
		return &RedisOptions{Mode: RedisSentinel, Failover: o}, nil
	case "redis+cluster", "rediss+cluster":
		o, err := parseCluster(strings.TrimSuffix(scheme, "+cluster"), rest)
		if err != nil {
			return fail(err)
		}
		return &RedisOptions{Mode: RedisCluster, Cluster: o}, nil
	}
	return fail(fmt.Errorf("unknown scheme %q", scheme))
}

// multiHost is the split form of [user:password@]host:port,host2:port[/path][?query].
type multiHost struct {
	userinfo string // still escaped, "" = none
	hosts    []string
	path     []string
	query    url.Values
}

func splitMultiHost(rest string, defaultPort string) (*multiHost, error) {
	rest, rawQuery, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	m := &multiHost{}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		m.userinfo, authority = authority[:i], authority[i+1:]
	}
	for h := range strings.SplitSeq(authority, ",") {
		if h == "" {
			return nil, errors.New("empty host")
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), defaultPort)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return nil, fmt.Errorf("bad host %q", h)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("bad port in %q", h)
		}
		m.hosts = append(m.hosts, h)
	}
	m.path = strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, errors.New("bad query string")
	}
	m.query = q
	return m, nil
}

// goRedisURL rebuilds m as the single-host URL go-redis parses, with the
// other hosts as addr= options.
func (m *multiHost) goRedisURL(scheme, path string) string {
	for _, h := range m.hosts[1:] {
		m.query.Add("addr", h)
	}
	var b strings.Builder
	b.WriteString(scheme + "://")
	if m.userinfo != "" {
		b.WriteString(m.userinfo + "@")
	}
	b.WriteString(m.hosts[0] + path)
	if len(m.query) > 0 {
		b.WriteString("?" + m.query.Encode())
	}
	return b.String()
}

func parseSentinel(scheme, rest string) (*redis.FailoverOptions, error) {
	m, err := splitMultiHost(rest, "26379")
	if err != nil {
		return nil, err
	}
	if len(m.path) == 0 || len(m.path) > 2 {
		return nil, errors.New("the path must be /master or /master/db")
	}
	m.query.Set("master_name", m.path[0])
	path := ""
	if len(m.path) == 2 {
		if _, err := strconv.ParseUint(m.path[1], 10, 8); err != nil {
			return nil, fmt.Errorf("bad database number %q", m.path[1])
		}
		path = "/" + m.path[1]
	}
	o, err := redis.ParseFailoverURL(m.goRedisURL(scheme, path))
	if err != nil {
		return nil, err
	}
	if o.Username == "" && o.Password == "" {
		o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
	}
	return o, nil
}

func parseCluster(scheme, rest string) (*redis.ClusterOptions, error) {
	m, err := splitMultiHost(rest, "6379")
	if err != nil {
		return nil, err
	}
	if len(m.path) > 1 || (len(m.path) == 1 && m.path[0] != "0") {
		return nil, errors.New("a cluster has only database 0")
	}
	return redis.ParseClusterURL(m.goRedisURL(scheme, ""))
}

// MinPoolSize raises the connection pool to at least n connections (per
// node on Cluster), for callers that hold blocking connections.
func (o *RedisOptions) MinPoolSize(n int) {
	switch o.Mode {
	case RedisStandalone: // below, as an unset mode
		o.Standalone.PoolSize = max(o.Standalone.PoolSize, n)
	case RedisSentinel:
		o.Failover.PoolSize = max(o.Failover.PoolSize, n)
	case RedisCluster:
		o.Cluster.PoolSize = max(o.Cluster.PoolSize, n)
	}
}

// NewClient returns a client for the options: redis.NewClient,
// redis.NewFailoverClient or redis.NewClusterClient.
func (o *RedisOptions) NewClient() redis.UniversalClient {
	switch o.Mode {
	case RedisSentinel:
		return redis.NewFailoverClient(o.Failover)
	case RedisCluster:
		return redis.NewClusterClient(o.Cluster)
	case RedisStandalone: // below, as an unset mode
	}
	return redis.NewClient(o.Standalone)
}

// NewRedisClient returns a client for a Redis URL (see ParseRedisURL).
func NewRedisClient(rawURL string) (redis.UniversalClient, error) {
	o, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, err
	}
	return o.NewClient(), nil
}

// RedactURL returns a Redis URL fit for logs: the password in the user info
// and any password query option are replaced with "xxxxx".
func RedactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		if strings.ContainsAny(s, "@:") {
			return "(unparsable URL)"
		}
		return s
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		user, _, hasPass := strings.Cut(authority[:i], ":")
		if hasPass {
			authority = user + ":xxxxx" + authority[i:]
		}
	}
	if path, rawQuery, hasQuery := strings.Cut(tail, "?"); hasQuery {
		parts := strings.Split(rawQuery, "&")
		for i, p := range parts {
			k, _, _ := strings.Cut(p, "=")
			if strings.Contains(strings.ToLower(k), "password") {
				parts[i] = k + "=xxxxx"
			}
		}
		tail = path + "?" + strings.Join(parts, "&")
	}
	return scheme + "://" + authority + tail
}
