// Package deploy holds Docstream's deployment files: the container image
// (Dockerfile), the compose stack with Prometheus and Grafana, the alert
// rules, the Grafana dashboard and the Kubernetes manifests.
//
// It has no Go code of its own. Its tests check the files: that every YAML
// and JSON file parses, that every metric named in the alert rules and the
// dashboard is served by a running gateway, that the Kubernetes manifests
// decode strictly into their API types and fit together, and that the
// Dockerfile's build line yields a static binary.
package deploy
