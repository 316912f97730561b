package httpapi

import "net/http"

// EventFeed serves the event feed (internal/events.Hub implements it).
type EventFeed interface {
	ServeSSE(w http.ResponseWriter, r *http.Request)
	ServeWS(w http.ResponseWriter, r *http.Request)
}

// subscriberCounter is implemented by feeds that bound their clients
// (internal/events.Hub does); the API exports the counts as metrics.
type subscriberCounter interface {
	SubscriberCounts() (open int, refused int64)
}

// eventsSSE is GET /api/v1/events.
func (s *Server) eventsSSE(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Events == nil {
		s.noFeed(w, r)
		return
	}
	s.cfg.Events.ServeSSE(w, r)
}

// eventsWS is GET /ws/events.
func (s *Server) eventsWS(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Events == nil {
		s.noFeed(w, r)
		return
	}
	s.cfg.Events.ServeWS(w, r)
}

func (s *Server) noFeed(w http.ResponseWriter, r *http.Request) {
	s.writeAPIError(w, r, &apiError{status: http.StatusServiceUnavailable, code: codeRedisUnavailable,
		message: "this API server runs without an event feed"})
}
