package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestParseRoutesUsage(t *testing.T) {
	for _, tc := range []struct {
		args                []string
		wantErr             error
		wantOut, wantErrOut string
	}{
		{[]string{"--help"}, flag.ErrHelp, "usage: x", ""},
		{[]string{"-h"}, flag.ErrHelp, "usage: x", ""},
		{[]string{"--bogus"}, nil, "", "flag provided but not defined: -bogus"},
		{[]string{"-n", "3"}, nil, "", ""},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.Int("n", 0, "a number")
		fs.Usage = func() { _, _ = fs.Output().Write([]byte("usage: x\n")) }
		var out, errOut bytes.Buffer
		err := Parse(fs, tc.args, &out, &errOut)
		if tc.wantErr != nil && !errors.Is(err, tc.wantErr) || tc.wantErr == nil && tc.wantErrOut == "" && err != nil {
			t.Errorf("%v: err %v, want %v", tc.args, err, tc.wantErr)
		}
		if tc.wantErrOut != "" && err == nil {
			t.Errorf("%v: no error", tc.args)
		}
		if !strings.Contains(out.String(), tc.wantOut) || (tc.wantOut == "" && out.Len() > 0) {
			t.Errorf("%v: stdout %q, want %q", tc.args, out.String(), tc.wantOut)
		}
		if !strings.Contains(errOut.String(), tc.wantErrOut) || (tc.wantErrOut == "" && errOut.Len() > 0) {
			t.Errorf("%v: stderr %q, want %q", tc.args, errOut.String(), tc.wantErrOut)
		}
	}
	for _, a := range []string{"help", "-h", "-help", "--help"} {
		if !IsHelp(a) {
			t.Errorf("IsHelp(%q) = false", a)
		}
	}
	if IsHelp("--helpx") || IsHelp("run") {
		t.Error("IsHelp accepts other words")
	}
}
