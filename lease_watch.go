package dtq

import (
	"sync"
	"time"
)

// leaseMargin is how long before its lease runs out a handler is
// cancelled when no renewal extended it: the task may be reclaimed once the
// lease has run out, and the margin lets the handler stop first, so two
// handlers of one task do not run at once however Redis answers
// (docs/reliability.md).
const leaseMargin = time.Second

// leaseCancelAt is when the handler of a lease last known to run from
// renewed for visibility is cancelled: visibility − leaseMargin later, or
// half the visibility for one of 2 s or less.
func leaseCancelAt(renewed time.Time, visibility time.Duration) time.Time {
	return renewed.Add(visibility - min(leaseMargin, visibility/2))
}

// leaseWatch cancels one handler when its lease is about to run out: at
// leaseCancelAt of the start of its last successful renewal (or of its
// claim), whether or not Redis answers the renewals in between.
type leaseWatch struct {
	visibility time.Duration

	mu      sync.Mutex
	last    time.Time // when the lease last began: the claim's or a renewal's send time
	timer   *time.Timer
	stopped bool
}

// newLeaseWatch calls cancel at leaseCancelAt(leasedAt, visibility) unless
// renewed or stopped first.
func newLeaseWatch(leasedAt time.Time, visibility time.Duration, cancel func()) *leaseWatch {
	l := &leaseWatch{visibility: visibility, last: leasedAt}
	l.timer = time.AfterFunc(time.Until(leaseCancelAt(leasedAt, visibility)), cancel)
	return l
}

// renewed records a renewal sent at sent that Redis answered with the lease
// extended: the cancel moves to leaseCancelAt(sent). An answer older than
// the last one counted changes nothing.
func (l *leaseWatch) renewed(sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || !sent.After(l.last) {
		return
	}
	l.last = sent
	// Once fired, the handler's context is cancelled for good: a renewal
	// answered late must not start another cancel, harmless as it would be.
	if l.timer.Stop() {
		l.timer.Reset(time.Until(leaseCancelAt(sent, l.visibility)))
	}
}

// stop ends the watch: the handler returned.
func (l *leaseWatch) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.timer.Stop()
}
