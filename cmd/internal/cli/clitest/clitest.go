// Package clitest checks a binary's command line against the conventions of
// cmd/internal/cli: help on stdout with exit status 0, mistakes on stderr
// with exit status 2.
package clitest

import (
	"bytes"
	"strings"
	"testing"
)

// Run runs a binary's command line in process: its exit status for args,
// with what it wrote.
type Run func(args []string, stdout, stderr *bytes.Buffer) int

// Help lists argument lists that must print usage containing want on
// stdout, nothing on stderr, and exit 0.
type Help struct {
	Args []string
	Want string
}

// Mistake lists argument lists that must print a message containing want
// on stderr, nothing on stdout, and exit 2.
type Mistake struct {
	Args []string
	Want string
}

// HelpForms are the ways to ask for the help of the command at path (a
// command, or a command and its subcommand): `PATH --help`, `PATH -h` and
// `help PATH`, each wanting want on stdout. A binary's TestHelpConventions
// builds them from its command table, so a subcommand added without help
// fails it.
func HelpForms(path []string, want string) []Help {
	return []Help{
		{Args: append(append([]string{}, path...), "--help"), Want: want},
		{Args: append(append([]string{}, path...), "-h"), Want: want},
		{Args: append([]string{"help"}, path...), Want: want},
	}
}

// Check runs every case as a subtest.
func Check(t *testing.T, run Run, helps []Help, mistakes []Mistake) {
	t.Helper()
	for _, h := range helps {
		t.Run("help/"+strings.Join(h.Args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(h.Args, &stdout, &stderr)
			if code != 0 || !strings.Contains(stdout.String(), h.Want) || stderr.Len() != 0 {
				t.Errorf("%q: exit %d (want 0), stdout (want %q):\n%s\nstderr (want nothing):\n%s", h.Args, code, h.Want, stdout.String(), stderr.String())
			}
		})
	}
	for _, m := range mistakes {
		t.Run("mistake/"+strings.Join(m.Args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(m.Args, &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), m.Want) || stdout.Len() != 0 {
				t.Errorf("%q: exit %d (want 2), stderr (want %q):\n%s\nstdout (want nothing):\n%s", m.Args, code, m.Want, stderr.String(), stdout.String())
			}
		})
	}
}
