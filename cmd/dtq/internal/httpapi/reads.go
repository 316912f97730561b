package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"slices"

	"github.com/dtq-io/dtq/dtqtype"
)

// The plain read routes have two shapes: a list, which takes its filters,
// limit and cursor in the query and answers one dtqtype.ListResult page,
// and a lookup, which takes one path value and no query and answers the
// thing it names.

// listQuery parses a list route's query string: filters are the parameters
// the route takes besides limit and cursor, which every list takes. An
// unknown or repeated parameter, or a limit outside 1..1000, is 400;
// limit is 0 when absent (the list's default).
func listQuery(r *http.Request, filters ...string) (url.Values, int, error) {
	q, err := parseQuery(r, slices.Concat(filters, []string{"limit", "cursor"})...)
	if err != nil {
		return nil, 0, err
	}
	limit, err := parseLimit(q)
	if err != nil {
		return nil, 0, err
	}
	return q, limit, nil
}

// serveList answers a list route: params builds list's params from the
// query (the filters and cursor by name) and the limit, and the page list
// returns is the answer, 200. A list error is mapped by queryError, so
// that an invalid filter or cursor is 400.
func serveList[P, T any](s *Server, w http.ResponseWriter, r *http.Request,
	list func(context.Context, *P) (*dtqtype.ListResult[T], error),
	params func(q url.Values, limit int) *P, filters ...string) {
	q, limit, err := listQuery(r, filters...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := list(r.Context(), params(q, limit))
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// serveLookup answers a lookup route: get reads what the path value named
// key identifies, and that is the answer, 200. The route takes no query
// parameter.
func serveLookup[T any](s *Server, w http.ResponseWriter, r *http.Request,
	get func(ctx context.Context, id string) (T, error), key string) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := get(r.Context(), r.PathValue(key))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, v)
}
