package main

// output.go owns how results are printed: JSON documents for --json,
// aligned tables otherwise, byte sizes and times in a human form, and the
// progress line long commands draw on a terminal's stderr.
//
// A progress belongs to the goroutine running its command.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// writeJSON prints v as one indented JSON document.
func (e *env) writeJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table returns an aligned-column writer on stdout; Flush it.
func (e *env) table() *tabwriter.Writer {
	return tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// msTime prints a Kafka timestamp (ms since the epoch; -1 for none).
func msTime(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// text prints bytes for a person: null, a quoted string when UTF-8, else
// base64.
func text(b []byte) string {
	switch {
	case b == nil:
		return "null"
	case utf8.Valid(b):
		return strconv.Quote(string(b))
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}

// jsonBytes is bytes in JSON: a string when UTF-8, else {"base64": "..."};
// null for nil.
type jsonBytes []byte

func (b jsonBytes) MarshalJSON() ([]byte, error) {
	switch {
	case b == nil:
		return []byte("null"), nil
	case utf8.Valid(b):
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(b)})
}

// progress draws a one-line progress indicator on stderr when stderr is a
// terminal; it is silent otherwise.
type progress struct {
	w     io.Writer // nil when silent
	label string
	total int64 // 0 when unknown
	last  time.Time
}

func (e *env) progress(label string, total int64) *progress {
	p := &progress{label: label, total: total}
	if f, ok := e.stderr.(*os.File); ok && !e.g.json {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.w = f
		}
	}
	return p
}

// set shows done units of work, at most ten times a second.
func (p *progress) set(done int64) {
	if p.w == nil {
		return
	}
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond || done == p.total {
		p.last = now
		if p.total <= 0 {
			fmt.Fprintf(p.w, "\r%s %d", p.label, done)
			return
		}
		const width = 30
		filled := int(min(done, p.total) * width / p.total)
		fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.label, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), done, p.total)
	}
}

// done erases the line.
func (p *progress) done() {
	if p.w != nil {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
