// Package deploy holds the deployment files of Sluice (compose.yaml, the
// Kubernetes manifests in k8s/, the systemd unit in systemd/, a sample
// configuration and the Prometheus rules and dashboard) and, in its tests,
// the checks of them this repository can run without a container runtime
// or a cluster (deploy_test.go). It has no code of its own.
package deploy
