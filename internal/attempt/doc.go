// Package attempt owns what happens once one attempt of a task has run,
// for the Go Worker and for HTTP workers (WorkerGateway) alike: the
// decision it leads to (succeed, retry after a backoff, dead-letter; a
// cancel request wins inside the scripts), the success value with its result cap, the
// finalize write and its retry policy, and the reclaim step that brings
// expired leases back. The root package maps handler errors and context
// causes onto an End; everything from there on is decided here, once.
package attempt
