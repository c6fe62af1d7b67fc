package main

import (
	"bytes"
	"strings"
	"testing"
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
