// Package helm holds the tests of the dtq Helm chart in dtq/: they render it
// with Helm's Go library and decode every manifest strictly into the
// Kubernetes, Prometheus Operator and KEDA API types. It is a module of its
// own so that none of those dependencies enters the library's module graph.
package helm
