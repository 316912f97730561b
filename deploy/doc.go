// Package deploy holds dtq's deployment files: the Compose file, systemd
// units, Kubernetes manifests, Prometheus alerts and the Grafana dashboard
// (README.md says which is which). It has no code; its tests check that the
// files parse, use only real settings and flags, and agree with each other.
package deploy
