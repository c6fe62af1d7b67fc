package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/cmd/internal/cli/clitest"
)

// TestCommandLine runs sluiced's command line in process. Each case fails
// before the broker would open anything: the node id -1 makes a broker that
// did start refuse its configuration with exit status 1, so a stray
// argument that is ignored shows as 1, not as a hang.
func TestCommandLine(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrHas  string
		stderrLack string
	}{
		{"version", []string{"--version"}, 0, "sluiced ", "", "usage"},
		{"stray argument", []string{"--node-id", "-1", "status"}, 2, "", `unexpected argument "status"`, "node id"},
		{"stray argument after flags", []string{"--data-dir", t.TempDir(), "--node-id=-1", "start", "now"}, 2, "", `unexpected argument "start"`, "node id"},
		{"unknown flag", []string{"--no-such-flag"}, 2, "", "flag provided but not defined: -no-such-flag\nrun 'sluiced --help'", "usage:"},
		{"help", []string{"--help"}, 0, "usage: sluiced", "", "usage"},
		{"bad configuration", []string{"--node-id", "-1"}, 1, "", "must not be negative", "usage"},
		// Every key of the sample file is a flag (the node id on the
		// command line wins, and stops the broker before it starts).
		{"sample config file", []string{"--config", "../../deploy/sluiced.yaml", "--node-id", "-1"}, 1, "", "must not be negative", "unknown key"},
		{"super user not a principal", []string{"--super-users", "User:a;bob"}, 1, "", "--super-users", ""},
		{"tls key without cert", []string{"--tls-key-file", "k.pem"}, 1, "", "go together", ""},
		{"listeners replace kafka-listen", []string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--kafka-listen", "127.0.0.1:0"}, 2, "", "--listeners replaces --kafka-listen", ""},
		{"listeners parsed", []string{"--listeners", "BOGUS://127.0.0.1:9092"}, 1, "", "not a security protocol", ""},
		{"TLS listener without a certificate", []string{"--listeners", "SASL_SSL://127.0.0.1:9093"}, 1, "", "needs --tls-cert-file", ""},
		{"unknown SASL mechanism", []string{"--sasl-enabled-mechanisms", "GSSAPI"}, 1, "", `unknown mechanism "GSSAPI"`, ""},
		{"inter-broker listener and listen address", []string{"--listeners", "CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0", "--listener-security-protocol-map", "CLIENT:PLAINTEXT,BROKER:PLAINTEXT",
			"--inter-broker-listener", "BROKER", "--inter-broker-listen", "127.0.0.1:0"}, 1, "", "--inter-broker-listen and --inter-broker-listener BROKER both name the inter-broker listener; give one", ""},
		{"inter-broker listener unknown", []string{"--listeners", "CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0", "--listener-security-protocol-map", "CLIENT:PLAINTEXT,BROKER:PLAINTEXT",
			"--inter-broker-listener", "REPLICATION"}, 1, "", "--inter-broker-listener REPLICATION is not one of --listeners (CLIENT, BROKER)", ""},
		{"inter-broker listener and protocol", []string{"--listeners", "CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0", "--listener-security-protocol-map", "CLIENT:PLAINTEXT,BROKER:PLAINTEXT",
			"--inter-broker-listener", "BROKER", "--inter-broker-security-protocol", "SSL"}, 1, "", "--inter-broker-security-protocol goes with --inter-broker-listen", ""},
		{"inter-broker listener over SASL", []string{"--listeners", "CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0", "--listener-security-protocol-map", "CLIENT:PLAINTEXT,BROKER:SASL_PLAINTEXT",
			"--inter-broker-listener", "BROKER"}, 1, "", "speaks SASL_PLAINTEXT: brokers authenticate each other with mutual TLS, not SASL", ""},
		{"inter-broker listener without listeners", []string{"--inter-broker-listener", "BROKER"}, 1, "", "--inter-broker-listener BROKER needs --listeners", ""},
		{"upload session TTL checked", []string{"--upload-session-ttl", "-1s"}, 1, "", "upload session TTL, max object bytes", ""},
		{"max object bytes checked", []string{"--max-object-bytes", "-5"}, 1, "", "must not be negative", ""},
		{"max object bytes beyond the parts", []string{"--max-object-bytes", "1000000000000"}, 1, "", "needs more than 10000 parts", ""},
		{"disk watermarks checked", []string{"--disk-watermarks", "90,80,95"}, 2, "", "must increase", ""},
		{"topic defaults checked", []string{"--default-replication-factor", "2", "--default-min-insync-replicas", "3"}, 1, "", "every acks=all write would be refused", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := exitCode(run(tc.args, &stdout, &stderr), &stderr)
			if code != tc.code || !strings.HasPrefix(stdout.String(), tc.stdout) ||
				!strings.Contains(stderr.String(), tc.stderrHas) || (tc.stderrLack != "" && strings.Contains(stderr.String(), tc.stderrLack)) {
				t.Fatalf("sluiced %v: exit %d (want %d)\nstdout: %s\nstderr: %s", tc.args, code, tc.code, stdout.String(), stderr.String())
			}
		})
	}
}

// TestHelpConventions: help on stdout with exit 0, mistakes on stderr with
// exit 2 (cmd/internal/cli); none of them starts a broker.
func TestHelpConventions(t *testing.T) {
	run := func(args []string, stdout, stderr *bytes.Buffer) int {
		return exitCode(run(args, stdout, stderr), stderr)
	}
	clitest.Check(t, run, []clitest.Help{
		{Args: []string{"--help"}, Want: "usage: sluiced [flags]"},
		{Args: []string{"-h"}, Want: "usage: sluiced [flags]"},
		{Args: []string{"help"}, Want: "-node-id"},
	}, []clitest.Mistake{
		{Args: []string{"--no-such-flag"}, Want: "flag provided but not defined: -no-such-flag"},
		{Args: []string{"bogus"}, Want: `unexpected argument "bogus"`},
		{Args: []string{"help", "bogus"}, Want: `unexpected argument "help"`},
	})
}
