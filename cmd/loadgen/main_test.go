package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
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
