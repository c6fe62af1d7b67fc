package main

// progress_linux_test.go checks the progress line of the long commands
// (verify, export) on a real terminal: stderr is the slave side of a
// pseudo-terminal, whose master side the test reads. Off a terminal, or
// with --json, nothing but the command's own output is written.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: its master side, and its slave side (a
// terminal, as a shell gives a command's stderr).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pseudo-terminal number: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pseudo-terminal's slave: %v", err)
	}
	return master, slave
}

// runOnTerminal runs tierctl with stderr on a pseudo-terminal and returns
// its exit status, stdout, and what reached the terminal.
func (f *fixture) runOnTerminal(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	master, slave := openPTY(t)
	got := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		_, err := io.Copy(&b, master) // ends with EIO once the slave is closed
		if err != nil && !errors.Is(err, syscall.EIO) {
			b.WriteString("\nread error: " + err.Error())
		}
		got <- b.Bytes()
	}()
	var out bytes.Buffer
	all := append([]string{"--etcd-endpoints", etcdURL, "--prefix", f.prefix,
		"--object-store", "file://" + filepath.Join(f.dataDir, "objects")}, args...)
	code := run(t.Context(), all, &out, slave)
	slave.Close()
	return code, out.String(), string(<-got)
}

func TestProgressOnTerminal(t *testing.T) {
	f := newFixture(t)

	// verify: one step per remote object (three), then the line erased.
	code, out, term := f.runOnTerminal(t, "verify", "--data-dir", f.dataDir)
	if code != 0 || !strings.Contains(out, "3 objects, 20 local batches: 0 problems") {
		t.Fatalf("verify on a terminal: exit %d\nstdout:\n%s\nterminal:\n%q", code, out, term)
	}
	full := "\rverify [" + strings.Repeat("=", 30) + "] 3/3"
	if !strings.HasPrefix(term, "\rverify [") || !strings.Contains(term, full) || !strings.HasSuffix(term, "\r\033[K") {
		t.Fatalf("verify's progress on the terminal: %q, want %q... then the line erased", term, full)
	}
	if strings.Contains(out, "\r") || strings.Contains(out, "verify [") {
		t.Fatalf("the progress line reached stdout: %q", out)
	}

	// export: one step per record of [0, 100), the remote objects and the local tail.
	dst := filepath.Join(t.TempDir(), "orders.parquet")
	code, out, term = f.runOnTerminal(t, "export", "orders/0", "--out", dst, "--data-dir", f.dataDir)
	if code != 0 || !strings.Contains(out, "wrote 100 records") {
		t.Fatalf("export on a terminal: exit %d\nstdout:\n%s\nterminal:\n%q", code, out, term)
	}
	full = "\rexport [" + strings.Repeat("=", 30) + "] 100/100"
	if !strings.Contains(term, full) || !strings.HasSuffix(term, "\r\033[K") {
		t.Fatalf("export's progress on the terminal: %q, want %q then the line erased", term, full)
	}

	// --json: the terminal gets nothing.
	code, _, term = f.runOnTerminal(t, "verify", "--json", "--data-dir", f.dataDir)
	if code != 0 || term != "" {
		t.Fatalf("verify --json on a terminal: exit %d, terminal %q (want nothing)", code, term)
	}
	// Off a terminal (a pipe, a file), no progress either.
	code, _, errs := f.run(t, "verify", "--data-dir", f.dataDir)
	if code != 0 || errs != "" {
		t.Fatalf("verify off a terminal: exit %d, stderr %q (want nothing)", code, errs)
	}
}

// TestProgressLine draws the line on a writer: a bar for a known total, a
// count for an unknown one, at most ten lines a second except the last.
func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, label: "export", total: 30}
	p.set(15)
	p.set(16) // within 100 ms of the last: not drawn
	p.set(30) // the last: drawn at once
	p.done()
	want := "\rexport [" + strings.Repeat("=", 15) + strings.Repeat(" ", 15) + "] 15/30" +
		"\rexport [" + strings.Repeat("=", 30) + "] 30/30" + "\r\033[K"
	if b.String() != want {
		t.Fatalf("progress with a total:\n got %q\nwant %q", b.String(), want)
	}
	b.Reset()
	p = &progress{w: &b, label: "listing the bucket"}
	p.set(7)
	p.done()
	if want := "\rlisting the bucket 7\r\033[K"; b.String() != want {
		t.Fatalf("progress without a total: got %q, want %q", b.String(), want)
	}
	silent := &progress{label: "x", total: 3} // off a terminal
	silent.set(3)
	silent.done()
}
