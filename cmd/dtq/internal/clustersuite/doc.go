// Package clustersuite holds dtq's Redis Cluster tests (in its _test
// files): a real cluster of redis-server processes started by the tests
// (redis-server --cluster-enabled yes, redis-cli --cluster create), the
// whole task lifecycle on queues placed on different masters, cancel of
// running tasks on every shard, workflows whose nodes sit on three masters
// (a DAG, a dependency failure, a cancel, a fan-out, a submission cut
// short and completed by the sweep), and a master killed under load. See the
// "Scaling out" section of docs/operations.md.
package clustersuite
