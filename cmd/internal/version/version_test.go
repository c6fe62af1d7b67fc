package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	rev := "768fe18a0b1c2d3e4f5061728394a5b6c7d8e9f0"
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "sluiced (no build information)"},
		{"tagged, clean", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-01-02T15:04:05Z"}, {Key: "vcs.modified", Value: "false"}}},
			true, "sluiced v0.3.1 (commit 768fe18a0b1c, 2026-01-02T15:04:05Z) go1.26.8"},
		{"dirty work tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}},
			true, "sluiced (devel) (commit 768fe18a0b1c, modified) go1.26.8"},
		{"no vcs (go run of a file, a test binary)", &debug.BuildInfo{GoVersion: "go1.26.8"},
			true, "sluiced (devel) go1.26.8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := format("sluiced", tc.bi, tc.ok); got != tc.want {
				t.Fatalf("format = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStringNamesTheBinary(t *testing.T) {
	if got := String("tierctl"); !strings.HasPrefix(got, "tierctl ") {
		t.Fatalf("String = %q", got)
	}
}
