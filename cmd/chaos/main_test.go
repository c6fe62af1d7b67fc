package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/cmd/internal/cli/clitest"
)

func TestCommandLine(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		output string
	}{
		{[]string{"--version"}, 0, "chaos "},
		{[]string{"run", "--dir", t.TempDir(), "leader-kill"}, 2, `unexpected argument "leader-kill"`},
		{[]string{"run", "--help"}, 0, "-scenario"},
		{[]string{"check"}, 2, "usage: chaos check"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.output) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, tc.code, tc.output, stdout.String(), stderr.String())
			}
		})
	}
}

// TestHelpConventions: help of every kind on stdout with exit 0, mistakes
// on stderr with exit 2 (cmd/internal/cli); nothing is started.
func TestHelpConventions(t *testing.T) {
	run := func(args []string, stdout, stderr *bytes.Buffer) int {
		return run(t.Context(), args, stdout, stderr)
	}
	// Every command of the table answers each form of help with its own
	// usage, and the top-level usage lists it.
	var tree []clitest.Help
	for _, c := range commands {
		tree = append(tree, clitest.HelpForms([]string{c.name}, "usage: chaos "+c.name+" ")...)
		tree = append(tree, clitest.Help{Args: []string{"--help"}, Want: c.summary})
	}
	clitest.Check(t, run, append(tree, []clitest.Help{
		{Args: []string{"--help"}, Want: "usage: chaos command"},
		{Args: []string{"-h"}, Want: "usage: chaos command"},
		{Args: []string{"help"}, Want: "usage: chaos command"},
		{Args: []string{"run", "--help"}, Want: "usage: chaos run"},
		{Args: []string{"run", "-h"}, Want: "-scenario"},
		{Args: []string{"help", "run"}, Want: "usage: chaos run"},
		{Args: []string{"check", "--help"}, Want: "usage: chaos check"},
		{Args: []string{"help", "check"}, Want: "usage: chaos check"},
	}...), []clitest.Mistake{
		{Args: []string{"--no-such-flag"}, Want: `unknown command "--no-such-flag"`},
		{Args: []string{"bogus"}, Want: `unknown command "bogus"`},
		{Args: []string{"help", "bogus"}, Want: `unknown command "bogus"`},
		{Args: []string{"run", "--bogus"}, Want: "flag provided but not defined: -bogus"},
		{Args: []string{"check", "--bogus"}, Want: "usage: chaos check"},
		{Args: []string{"check"}, Want: "usage: chaos check"},
	})
}

// A passing run in a temporary directory keeps only its history.
func TestRemoveAllButKeepsTheHistory(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "history.jsonl")
	for _, p := range []string{keep, filepath.Join(dir, "b1", "data", "seg"), filepath.Join(dir, "etcd.log")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeAllBut(dir, keep); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "history.jsonl" {
		t.Fatalf("left %v, want only history.jsonl", entries)
	}
}
