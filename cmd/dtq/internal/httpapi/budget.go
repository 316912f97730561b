package httpapi

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// DefaultMaxBodyBytesInFlight is Config.MaxBodyBytesInFlight's default:
// 4 batches of the largest size at once. A body costs the process about
// four times its size while it is decoded, checked and sent to Redis
// (40 concurrent 15 MiB batches peaked at 330 MB RSS with this budget,
// 1.1 GB with 256 MiB), and ordinary requests are a few KiB.
const DefaultMaxBodyBytesInFlight = 64 << 20

// bodyChunk is the least a body of unknown length reserves each time its
// buffer fills (then it doubles the buffer, and reserves what it grew by).
const bodyChunk = 64 << 10

// bodyBudget bounds the request body bytes one API process holds at once:
// each is reserved before it is read (by its Content-Length, or chunk by
// chunk as it arrives) and held until the request has been answered, since
// what is decoded from it lives that long. Forty 15 MiB batches once took
// the API from 58 MiB to 1.6 GiB.
type bodyBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

// reserve takes n bytes of the budget, or reports false (taking nothing)
// when they are not free.
func (b *bodyBudget) reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *bodyBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// inUse is the bytes reserved now.
func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// errServerBusy is readBody's answer when the body budget is spent: 503
// SERVER_BUSY with Retry-After, nothing read and nothing written.
var errServerBusy = errors.New("request bodies in flight use the whole budget")

// reserveBody takes n bytes of the request's budget, recording them on its
// state so that serve releases them once the request is answered.
func reserveBody(r *http.Request, n int64) bool {
	st := stateFrom(r.Context())
	if st == nil || st.budget == nil || n <= 0 {
		return true
	}
	if !st.budget.reserve(n) {
		return false
	}
	st.reserved += n
	return true
}

// readAllReserved reads body into a buffer that grows only as far as the
// budget allows: the whole size when it is known (one allocation, not the
// doubling io.ReadAll does), else what each doubling adds.
func readAllReserved(r *http.Request, body io.Reader, size int64) ([]byte, error) {
	if size >= 0 {
		if !reserveBody(r, size) {
			return nil, errServerBusy
		}
	}
	b := make([]byte, 0, max(size, 0)+1) // +1 sees EOF without growing
	for {
		if len(b) == cap(b) {
			if size >= 0 && int64(len(b)) > size {
				// More than Content-Length said: cannot happen through
				// net/http, which cuts the body at Content-Length.
				return nil, errServerBusy
			}
			// Double, as io.ReadAll would, reserving what the buffer grows by.
			grow := max(bodyChunk, int64(cap(b)))
			if !reserveBody(r, grow) {
				return nil, errServerBusy
			}
			nb := make([]byte, len(b), int64(cap(b))+grow)
			copy(nb, b)
			b = nb
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
