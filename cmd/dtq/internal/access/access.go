// Package access holds who may call dtq's HTTP API: API keys with their
// roles and queue scopes (DTQ_API_KEYS), and the host names an
// unauthenticated API answers (DTQ_ALLOWED_HOSTS). Configuration parses
// them; the HTTP API enforces them.
package access

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/dtq-io/dtq"
)

// Role is an API key's role. Roles are sets of rights: reader is in
// producer and in worker, and admin has every right.
type Role int

// Roles.
const (
	RoleReader Role = iota + 1
	RoleProducer
	RoleAdmin
	RoleWorker
)

// Grants reports whether a key of role r may call a route that needs role
// need: the same role, reader for any role, and anything for admin.
func (r Role) Grants(need Role) bool {
	return r == need || need == RoleReader || r == RoleAdmin
}

// String returns the role's name as written in DTQ_API_KEYS.
func (r Role) String() string {
	switch r {
	case RoleReader:
		return "reader"
	case RoleProducer:
		return "producer"
	case RoleAdmin:
		return "admin"
	case RoleWorker:
		return "worker"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

func parseRole(s string) (Role, bool) {
	for _, r := range []Role{RoleReader, RoleProducer, RoleAdmin, RoleWorker} {
		if s == r.String() {
			return r, true
		}
	}
	return 0, false
}

// Key is one configured API key (DTQ_API_KEYS entry
// role:name:secret[:queues=q1,q2]).
type Key struct {
	Role   Role
	Name   string // shown in logs and the audit log as the actor
	Secret string // never logged or echoed
	// Queues, when not nil, scopes the key (docs/security.md): it sees and acts on
	// these queues only, and is refused global views (metrics, workers,
	// audit). Nil: every queue.
	Queues []string
}

// Scoped reports whether k is limited to some queues.
func (k Key) Scoped() bool { return k.Queues != nil }

// Allows reports whether k may see and act on queue.
func (k Key) Allows(queue string) bool {
	return !k.Scoped() || slices.Contains(k.Queues, queue)
}

// AdminKey returns the key of the legacy single DTQ_API_KEY: role admin,
// name "admin".
func AdminKey(secret string) Key {
	return Key{Role: RoleAdmin, Name: "admin", Secret: secret}
}

const keyForm = "expected comma-separated role:name:secret[:queues=q1,q2] entries, role one of reader, producer, worker, admin"

// scopeMark starts the queue list of a scoped key inside its entry.
const scopeMark = ":queues="

// ParseKeys parses DTQ_API_KEYS: comma-separated role:name:secret
// entries (the secret may itself contain ':'). An empty string means no keys
// (open mode). Errors name the entry by position and never echo any part of
// it, since a misordered entry may put the secret where the role belongs.
// Several keys may share a name (key rotation); no two may share a secret.
func ParseKeys(s string) ([]Key, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var keys []Key
	n := 0 // entries seen, for messages
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		// An element without ':' continues the previous key's queue list.
		if entry != "" && !strings.Contains(entry, ":") && len(keys) > 0 && keys[len(keys)-1].Scoped() {
			if !dtq.ValidQueueName(entry) {
				return nil, fmt.Errorf("API key entry %d: queue %q of its queues= list must match ^[a-z0-9][a-z0-9_-]{0,63}$", n, entry)
			}
			keys[len(keys)-1].Queues = append(keys[len(keys)-1].Queues, entry)
			continue
		}
		n++
		parts := strings.SplitN(entry, ":", 3)
		if len(parts) != 3 {
			if entry == "" {
				return nil, fmt.Errorf("API key entry %d is empty; %s", n, keyForm)
			}
			return nil, fmt.Errorf("API key entry %d is not of the form role:name:secret; %s", n, keyForm)
		}
		role, ok := parseRole(parts[0])
		if !ok {
			return nil, fmt.Errorf("API key entry %d has an unknown role; %s", n, keyForm)
		}
		k := Key{Role: role, Name: parts[1], Secret: parts[2]}
		if i := strings.LastIndex(k.Secret, scopeMark); i >= 0 {
			q := k.Secret[i+len(scopeMark):]
			k.Secret = k.Secret[:i]
			if !dtq.ValidQueueName(q) {
				return nil, fmt.Errorf("API key entry %d: the queues= list must start with a queue name matching ^[a-z0-9][a-z0-9_-]{0,63}$", n)
			}
			k.Queues = []string{q}
		}
		keys = append(keys, k)
	}
	if err := ValidateKeys(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// ValidateKeys checks every key and that no secret is used twice.
func ValidateKeys(keys []Key) error {
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		n := i + 1
		switch {
		case k.Role < RoleReader || k.Role > RoleWorker:
			return fmt.Errorf("API key entry %d has an unknown role; %s", n, keyForm)
		case k.Name == "":
			return fmt.Errorf("API key entry %d has an empty name; %s", n, keyForm)
		case !visibleASCII(k.Name, 128):
			return fmt.Errorf("API key entry %d: the name must be 1..128 printable ASCII characters without spaces or commas", n)
		case k.Secret == "":
			return fmt.Errorf("API key entry %d has an empty secret; %s", n, keyForm)
		case !visibleASCII(k.Secret, 1024):
			return fmt.Errorf("API key entry %d: the secret must be printable ASCII without spaces or commas", n)
		}
		for _, q := range k.Queues {
			if !dtq.ValidQueueName(q) {
				return fmt.Errorf("API key entry %d: queue %q must match ^[a-z0-9][a-z0-9_-]{0,63}$", n, q)
			}
		}
		if k.Queues != nil && len(k.Queues) == 0 {
			return fmt.Errorf("API key entry %d: a scoped key needs at least one queue", n)
		}
		if prev, dup := seen[k.Secret]; dup {
			return fmt.Errorf("API key entries %d and %d have the same secret; give each key its own", prev, n)
		}
		seen[k.Secret] = n
	}
	return nil
}

// visibleASCII reports whether s is 1..max characters of 0x21..0x7e other
// than ',' (the list separator).
func visibleASCII(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := range len(s) {
		if s[i] <= 0x20 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

// ValidateAllowedHost checks one DTQ_ALLOWED_HOSTS entry: "*" (any host),
// a host name or an IP address, without a port.
func ValidateAllowedHost(h string) error {
	if h == "*" {
		return nil
	}
	if h == "" || len(h) > 253 {
		return fmt.Errorf("a host must be 1..253 characters")
	}
	if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
		return nil
	}
	for i := range len(h) {
		if !hostNameByte(h[i]) {
			return fmt.Errorf("host %q: must be a host name or an IP address, without a port or scheme", h)
		}
	}
	return nil
}

// hostNameByte reports whether c may appear in a host name: an ASCII
// letter or digit, '-' or '.'.
func hostNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.'
}
