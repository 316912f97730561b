// Package partitionsuite holds the network-fault suite (tests only): hosts
// are Linux network namespaces joined by a bridge, each running real
// processes (redis-server, Sentinels, a Redis Cluster, dtq API servers and
// workers), and the faults are the network's: partitions (full, one-way, a
// master cut off from its replicas and Sentinels but not from clients),
// latency and loss (tc netem), pauses (SIGSTOP) and kills. Every run's
// history is checked: submissions, cancels and reads against the
// idempotency model (porcupine), no acknowledged task lost, no two handlers
// of one task running at once, no task stuck at rest (docs/reliability.md,
// "Network faults").
//
// The tests need root, ip (iproute2), tc and nft (nftables); without them
// they fail naming what is missing. make test-partitions runs the random
// scenario for 10 minutes.
package partitionsuite
