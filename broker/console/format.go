package console

// This file owns how figures and record bytes are shown: the template
// functions, and a record's key, value and headers as text, JSON or hex.
//
// Invariant: every byte of a record reaches the page through html/template's
// escaping (never template.HTML), and a value shown is bounded by
// maxShownBytes, with what was cut said.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"
	"unicode/utf8"
)

// maxShownBytes bounds a value shown on a page.
const maxShownBytes = 16 << 10

var funcs = template.FuncMap{
	"bytes":   humanBytes,
	"fbytes":  func(v float64) string { return humanBytes(int64(v)) },
	"age":     ageString,
	"msTime":  msTime,
	"ids":     ids,
	"seconds": optSeconds,
	"rate":    optRate,
	"num":     func(v float64) string { return fmt.Sprintf("%.4g", v) },
	"keys":    sortedKeys,
	"path":    escape,
	"deref": func(p *int64) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprint(*p)
	},
	"pct": func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) },
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func msTime(ms int64) string {
	if ms <= 0 {
		return "—"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000Z")
}

func ids(v []int32) string {
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

func optSeconds(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return (time.Duration(*p * float64(time.Second))).Round(time.Second).String()
}

func optRate(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.2f/s", *p)
}

// shown is bytes as the page shows them in one format.
type shown struct {
	Text   string
	Note   string // why the format was not used, or what was cut
	Format string // the format actually used
}

// show renders b as format ("text", "json" or "hex"). Text that is not
// UTF-8, or JSON that does not parse, falls back to hex (said in Note).
func show(b []byte, format string) shown {
	cut := ""
	if len(b) > maxShownBytes {
		cut = fmt.Sprintf("first %d of %d bytes shown", maxShownBytes, len(b))
		b = b[:maxShownBytes]
	}
	out := shown{Format: format, Note: cut}
	switch format {
	case "json":
		var buf bytes.Buffer
		if cut == "" && json.Indent(&buf, b, "", "  ") == nil {
			out.Text = buf.String()
			return out
		}
		if cut == "" {
			out.Note = "not JSON"
		}
		out.Format = "text"
		fallthrough
	case "text":
		if utf8.Valid(b) {
			out.Text = string(b)
			return out
		}
		out.Note = strings.TrimPrefix(out.Note+"; not UTF-8 text", "; ")
		out.Format = "hex"
	}
	out.Format = "hex"
	out.Text = hex.Dump(b)
	return out
}
