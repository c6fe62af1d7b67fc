package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/cmd/internal/cli/clitest"
)

func TestCommandLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run([]string{"--version"}, &stdout, &stderr); err != nil || !strings.HasPrefix(stdout.String(), "loadgen ") {
		t.Fatalf("--version: %v, stdout %q", err, stdout.String())
	}
	// A stray word is refused before any connection is made.
	stderr.Reset()
	err := run([]string{"--brokers", "127.0.0.1:1", "--duration", "1ms", "produce"}, &stdout, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), `unexpected argument "produce"`) {
		t.Fatalf("stray argument: %v, stderr %q", err, stderr.String())
	}
	if err := run([]string{"--no-such-flag"}, &stdout, &stderr); !errors.Is(err, errUsage) {
		t.Fatalf("unknown flag: %v", err)
	}
}

// Tenant flags are checked before any connection is made.
func TestTenantFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tenant", "user=alice"}, "no name"},
		{[]string{"--tenant", "name=a,colour=blue"}, `unknown key "colour"`},
		{[]string{"--scenario", "noisy-neighbour", "--tenant", "name=other"}, "noisy, quiet and replay"},
		{[]string{"--scenario", "peak", "--tenant", "name=a"}, "--tenant runs the steady scenario"},
		{[]string{"--tenant", "name=a", "--tenant", "name=a"}, "given twice"},
		{[]string{"--tenant", "name=a,role=reader"}, `role "reader"`},
	} {
		var stdout, stderr bytes.Buffer
		err := run(append([]string{"--brokers", "127.0.0.1:1"}, tc.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tc.want) {
			t.Errorf("%q: %v (stderr %q), want %s", tc.args, err, stderr.String(), tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	// Help goes to stdout (cmd/internal/cli's convention).
	if err := run([]string{"-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stdout.String(), "noisy-neighbour") || !strings.Contains(stdout.String(), "-tenant") {
		t.Errorf("-h: %v, usage lacks noisy-neighbour or --tenant:\n%s", err, stdout.String())
	}
}

// TestHelpConventions: help on stdout with exit 0, mistakes on stderr with
// exit 2 (cmd/internal/cli), before any connection is made.
func TestHelpConventions(t *testing.T) {
	run := func(args []string, stdout, stderr *bytes.Buffer) int {
		return exitCode(run(args, stdout, stderr), stderr)
	}
	clitest.Check(t, run, []clitest.Help{
		{Args: []string{"--help"}, Want: "usage: loadgen [flags]"},
		{Args: []string{"-h"}, Want: "usage: loadgen [flags]"},
		{Args: []string{"help"}, Want: "scenarios:"},
	}, []clitest.Mistake{
		{Args: []string{"--no-such-flag"}, Want: "flag provided but not defined: -no-such-flag"},
		{Args: []string{"bogus"}, Want: `unexpected argument "bogus"`},
	})
}
