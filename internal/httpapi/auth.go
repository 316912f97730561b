package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
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

// APIKey is one configured key (DTQ_API_KEYS entry
// role:name:secret[:queues=q1,q2]).
type APIKey struct {
	Role   Role
	Name   string // shown in logs and the audit log as the actor
	Secret string // never logged or echoed
	// Queues, when not nil, scopes the key (docs/security.md): it sees and acts on
	// these queues only, and is refused global views (metrics, workers,
	// audit). Nil: every queue.
	Queues []string
}

// scoped reports whether k is limited to some queues.
func (k APIKey) scoped() bool { return k.Queues != nil }

// allows reports whether k may see and act on queue.
func (k APIKey) allows(queue string) bool {
	return !k.scoped() || slices.Contains(k.Queues, queue)
}

// AdminKey returns the key of the legacy single DTQ_API_KEY: role admin,
// name "admin".
func AdminKey(secret string) APIKey {
	return APIKey{Role: RoleAdmin, Name: "admin", Secret: secret}
}

const keyForm = "expected comma-separated role:name:secret[:queues=q1,q2] entries, role one of reader, producer, worker, admin"

// scopeMark starts the queue list of a scoped key inside its entry.
const scopeMark = ":queues="

// ParseAPIKeys parses DTQ_API_KEYS: comma-separated role:name:secret
// entries (the secret may itself contain ':'). An empty string means no keys
// (open mode). Errors name the entry by position and never echo any part of
// it, since a misordered entry may put the secret where the role belongs.
// Several keys may share a name (key rotation); no two may share a secret.
func ParseAPIKeys(s string) ([]APIKey, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var keys []APIKey
	n := 0 // entries seen, for messages
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		// An element without ':' continues the previous key's queue list.
		if entry != "" && !strings.Contains(entry, ":") && len(keys) > 0 && keys[len(keys)-1].scoped() {
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
		k := APIKey{Role: role, Name: parts[1], Secret: parts[2]}
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
	if err := validateKeys(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// validateKeys checks every key and that no secret is used twice.
func validateKeys(keys []APIKey) error {
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
func visibleASCII(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

// keyEntry is a configured key with the SHA-256 of its secret: comparing
// fixed-length digests keeps the comparison constant-time even in length.
type keyEntry struct {
	key APIKey
	sum [sha256.Size]byte
}

func hashKeys(keys []APIKey) []keyEntry {
	out := make([]keyEntry, len(keys))
	for i, k := range keys {
		out[i] = keyEntry{key: k, sum: sha256.Sum256([]byte(k.Secret))}
	}
	return out
}

// lookup finds the key whose secret is secret. It compares against every key
// without stopping early, so timing does not tell which key matched or how
// much of a guess was right.
func (s *Server) lookup(secret string) (APIKey, bool) {
	sum := sha256.Sum256([]byte(secret))
	match := -1
	for i := range s.keys {
		eq := subtle.ConstantTimeCompare(sum[:], s.keys[i].sum[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return APIKey{}, false
	}
	return s.keys[match].key, true
}

type keyCtxKey struct{}

// KeyFromContext returns the API key that authenticated the request (its
// Secret is always empty). It reports false for open routes and in open
// mode.
func KeyFromContext(ctx context.Context) (APIKey, bool) {
	k, ok := ctx.Value(keyCtxKey{}).(APIKey)
	return k, ok
}

var errBadCredential = errors.New("bad credential")

// credential returns the secret the client sent in "Authorization: Bearer"
// or X-API-Key ("" when none). Both may be sent only if they agree.
func credential(r *http.Request) (string, error) {
	auth, apiKey := r.Header.Values("Authorization"), r.Header.Values("X-API-Key")
	if len(auth) > 1 || len(apiKey) > 1 {
		return "", fmt.Errorf("%w: send one Authorization or X-API-Key header", errBadCredential)
	}
	var bearer, header string
	if len(auth) == 1 {
		scheme, token, ok := strings.Cut(strings.TrimSpace(auth[0]), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return "", fmt.Errorf("%w: the Authorization header must be \"Bearer <key>\"", errBadCredential)
		}
		bearer = strings.TrimSpace(token)
	}
	if len(apiKey) == 1 {
		header = strings.TrimSpace(apiKey[0])
	}
	if bearer != "" && header != "" && bearer != header {
		return "", fmt.Errorf("%w: Authorization and X-API-Key carry different keys", errBadCredential)
	}
	if bearer != "" {
		return bearer, nil
	}
	return header, nil
}

// authorize wraps h so that only keys whose role grants need reach it
// (docs/security.md). need 0 is an open route; with no keys configured every route
// is open.
func (s *Server) authorize(need Role, sc scope, h http.HandlerFunc) http.HandlerFunc {
	if need == 0 {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if len(s.keys) == 0 {
			h(w, r)
			return
		}
		secret, err := credential(r)
		if err != nil {
			s.unauthorized(w, r, strings.TrimPrefix(err.Error(), errBadCredential.Error()+": "))
			return
		}
		if secret == "" {
			s.unauthorized(w, r, "an API key is required: send \"Authorization: Bearer <key>\" or \"X-API-Key: <key>\"")
			return
		}
		key, ok := s.lookup(secret)
		if !ok {
			s.unauthorized(w, r, "the API key is not valid")
			return
		}
		key.Secret = ""
		if st := stateFrom(r.Context()); st != nil {
			st.keyName = key.Name
		}
		if !key.Role.Grants(need) {
			s.writeAPIError(w, r, &apiError{status: http.StatusForbidden, code: codeForbidden,
				message: fmt.Sprintf("this endpoint needs the %s role; the key %q has the %s role", need, key.Name, key.Role),
				details: map[string]any{"required_role": need.String(), "role": key.Role.String()}})
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), keyCtxKey{}, key))
		if key.scoped() {
			var ok bool
			if r, ok = s.checkScope(w, r, key, sc); !ok {
				return
			}
		}
		h(w, r)
	}
}

func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="dtq"`)
	s.writeAPIError(w, r, &apiError{status: http.StatusUnauthorized, code: codeUnauthorized, message: msg})
}
