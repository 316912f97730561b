package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/dtq-io/dtq/cmd/dtq/internal/access"
)

// Role is an API key's role (see access.Role).
type Role = access.Role

// Roles.
const (
	RoleReader   = access.RoleReader
	RoleProducer = access.RoleProducer
	RoleAdmin    = access.RoleAdmin
	RoleWorker   = access.RoleWorker
)

// APIKey is one configured key (see access.Key).
type APIKey = access.Key

// AdminKey returns the key of the legacy single DTQ_API_KEY: role admin,
// name "admin".
func AdminKey(secret string) APIKey { return access.AdminKey(secret) }

// ParseAPIKeys parses DTQ_API_KEYS (see access.ParseKeys).
func ParseAPIKeys(s string) ([]APIKey, error) { return access.ParseKeys(s) }

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
	auth, apiKey := r.Header.Values("Authorization"), r.Header.Values("X-Api-Key")
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
		if key.Scoped() {
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
