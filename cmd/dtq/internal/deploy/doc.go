// Package deploy checks dtq's deployment files, which live in the
// repository's top-level deploy/ directory: the Compose file, systemd units,
// Kubernetes manifests, Prometheus alerts and the Grafana dashboard
// (deploy/README.md says which is which). It has no code; its tests check
// that the files parse, use only real settings and flags, and agree with
// each other.
package deploy
