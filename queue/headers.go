package queue

// This file owns the sluice.retry.* headers of a retried or dead-lettered
// copy (drawn in doc.go): Meta is their content, Meta.Headers writes them,
// Parse reads them back from outside bytes.
//
// Invariant: Parse(m.Headers()) == m for every Meta that Validate accepts
// (errors truncated to MaxErrorBytes first); Parse refuses anything else
// with an error naming the header, and never panics.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Header names.
const (
	HeaderPrefix          = "sluice.retry."
	HeaderSourceTopic     = HeaderPrefix + "source.topic"
	HeaderSourcePartition = HeaderPrefix + "source.partition"
	HeaderSourceOffset    = HeaderPrefix + "source.offset"
	HeaderGroup           = HeaderPrefix + "group"
	HeaderFirstSeen       = HeaderPrefix + "first.seen.ms"
	HeaderAttempt         = HeaderPrefix + "attempt"
	HeaderErrorClass      = HeaderPrefix + "error.class"
	HeaderError           = HeaderPrefix + "error"
	HeaderDue             = HeaderPrefix + "due.ms"
	HeaderTier            = HeaderPrefix + "tier"
	HeaderDeadReason      = HeaderPrefix + "dead.reason"
	// DeadReasonSkipped is the dead reason of a strict topic's paused
	// record moved aside by keys:skip.
	DeadReasonSkipped   = "skipped"
	HeaderHistoryPrefix = HeaderPrefix + "history."
)

// MaxErrorBytes bounds an error text in the headers.
const MaxErrorBytes = 512

// Failure is one failed delivery.
type Failure struct {
	At    time.Time
	Class string
	Error string
}

// Meta is what the headers of a copy say.
type Meta struct {
	SourceTopic     string
	SourcePartition int32
	SourceOffset    int64
	Group           string
	FirstSeen       time.Time
	Attempt         int // failed deliveries so far, = len(History)
	Due             time.Time
	Tier            int    // -1 on a dead letter
	DeadReason      string // "" on a retry copy
	History         []Failure
}

// Last is the last failure.
func (m Meta) Last() Failure {
	if len(m.History) == 0 {
		return Failure{}
	}
	return m.History[len(m.History)-1]
}

// TruncateError cuts an error text to MaxErrorBytes at a rune boundary and
// makes it valid UTF-8.
func TruncateError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxErrorBytes {
		return s
	}
	cut := MaxErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Headers writes m as headers (doc.go's table, in that order).
func (m Meta) Headers() []Header {
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	last := m.Last()
	out := []Header{
		{HeaderSourceTopic, []byte(m.SourceTopic)},
		{HeaderSourcePartition, []byte(strconv.Itoa(int(m.SourcePartition)))},
		{HeaderSourceOffset, []byte(strconv.FormatInt(m.SourceOffset, 10))},
		{HeaderGroup, []byte(m.Group)},
		{HeaderFirstSeen, []byte(ms(m.FirstSeen))},
		{HeaderAttempt, []byte(strconv.Itoa(m.Attempt))},
		{HeaderErrorClass, []byte(last.Class)},
		{HeaderError, []byte(TruncateError(last.Error))},
		{HeaderDue, []byte(ms(m.Due))},
	}
	if m.DeadReason == "" {
		out = append(out, Header{HeaderTier, []byte(strconv.Itoa(m.Tier))})
	} else {
		out = append(out, Header{HeaderDeadReason, []byte(m.DeadReason)})
	}
	for i, f := range m.History {
		v := ms(f.At) + "," + f.Class + "," + TruncateError(f.Error)
		out = append(out, Header{HeaderHistoryPrefix + strconv.Itoa(i+1), []byte(v)})
	}
	return out
}

// Parse reads the sluice.retry.* headers of a record. ok is false when it
// has none (a record from a source topic); headers of other names are
// ignored. A malformed or incomplete set is an error.
func Parse(headers []Header) (m Meta, ok bool, err error) {
	seen := map[string]string{}
	for _, h := range headers {
		if !strings.HasPrefix(h.Key, HeaderPrefix) {
			continue
		}
		if _, dup := seen[h.Key]; dup {
			return Meta{}, true, fmt.Errorf("header %s appears twice", h.Key)
		}
		if !utf8.Valid(h.Value) {
			return Meta{}, true, fmt.Errorf("header %s is not UTF-8", h.Key)
		}
		seen[h.Key] = string(h.Value)
	}
	if len(seen) == 0 {
		return Meta{}, false, nil
	}
	p := parser{seen: seen}
	m.SourceTopic = p.str(HeaderSourceTopic)
	if p.err == nil {
		if err := validTopicPart(m.SourceTopic, false); err != nil {
			p.err = fmt.Errorf("header %s: %w", HeaderSourceTopic, err)
		}
	}
	m.SourcePartition = int32(p.num(HeaderSourcePartition, 0, 1<<31-1))
	m.SourceOffset = p.num(HeaderSourceOffset, 0, 1<<63-1)
	m.Group = p.str(HeaderGroup)
	m.FirstSeen = p.time(HeaderFirstSeen)
	m.Attempt = int(p.num(HeaderAttempt, 1, MaxAttempts))
	class := p.str(HeaderErrorClass)
	if p.err == nil {
		if err := ValidateClass(class); err != nil {
			p.err = fmt.Errorf("header %s: %w", HeaderErrorClass, err)
		}
	}
	lastErr := p.str(HeaderError)
	m.Due = p.time(HeaderDue)
	if _, dead := seen[HeaderDeadReason]; dead {
		m.Tier = -1
		m.DeadReason = p.str(HeaderDeadReason)
		if p.err == nil && m.DeadReason != "permanent" && m.DeadReason != "exhausted" && m.DeadReason != DeadReasonSkipped {
			p.err = fmt.Errorf("header %s: %q is not permanent, exhausted or skipped", HeaderDeadReason, m.DeadReason)
		}
		if _, both := seen[HeaderTier]; both && p.err == nil {
			p.err = fmt.Errorf("headers %s and %s: a copy is a retry or a dead letter, not both", HeaderTier, HeaderDeadReason)
		}
	} else {
		m.Tier = int(p.num(HeaderTier, 0, MaxTiers-1))
	}
	if p.err != nil {
		return Meta{}, true, p.err
	}
	for i := 1; i <= m.Attempt; i++ {
		f, err := parseFailure(seen, i)
		if err != nil {
			return Meta{}, true, err
		}
		m.History = append(m.History, f)
	}
	if last := m.History[len(m.History)-1]; last.Class != class || last.Error != lastErr {
		return Meta{}, true, fmt.Errorf("headers %s and %s disagree with %s%d", HeaderErrorClass, HeaderError, HeaderHistoryPrefix, m.Attempt)
	}
	for k := range seen {
		if rest, isHist := strings.CutPrefix(k, HeaderHistoryPrefix); isHist {
			if n, err := strconv.Atoi(rest); err != nil || n < 1 || n > m.Attempt || strconv.Itoa(n) != rest {
				return Meta{}, true, fmt.Errorf("header %s: no such failure among %d", k, m.Attempt)
			}
		}
	}
	return m, true, nil
}

func parseFailure(seen map[string]string, i int) (Failure, error) {
	key := HeaderHistoryPrefix + strconv.Itoa(i)
	v, ok := seen[key]
	if !ok {
		return Failure{}, fmt.Errorf("header %s is missing", key)
	}
	at, rest, ok1 := strings.Cut(v, ",")
	class, text, ok2 := strings.Cut(rest, ",")
	if !ok1 || !ok2 {
		return Failure{}, fmt.Errorf("header %s: %q is not <unix ms>,<class>,<error>", key, v)
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil || ms < 0 || strconv.FormatInt(ms, 10) != at {
		return Failure{}, fmt.Errorf("header %s: %q is not a time in unix ms", key, at)
	}
	if err := ValidateClass(class); err != nil {
		return Failure{}, fmt.Errorf("header %s: %w", key, err)
	}
	if len(text) > MaxErrorBytes {
		return Failure{}, fmt.Errorf("header %s: error of %d bytes, at most %d", key, len(text), MaxErrorBytes)
	}
	return Failure{At: time.UnixMilli(ms), Class: class, Error: text}, nil
}

// parser reads required headers, keeping the first error.
type parser struct {
	seen map[string]string
	err  error
}

var errMissing = errors.New("is missing")

func (p *parser) str(key string) string {
	v, ok := p.seen[key]
	if !ok && p.err == nil {
		p.err = fmt.Errorf("header %s %w", key, errMissing)
	}
	return v
}

func (p *parser) num(key string, lo, hi int64) int64 {
	v := p.str(key)
	if p.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi || strconv.FormatInt(n, 10) != v {
		p.err = fmt.Errorf("header %s: %q is not an integer in [%d, %d]", key, v, lo, hi)
		return 0
	}
	return n
}

func (p *parser) time(key string) time.Time {
	ms := p.num(key, 0, 1<<53)
	return time.UnixMilli(ms)
}

// WithoutRetryHeaders returns headers less every sluice.retry.* header.
func WithoutRetryHeaders(headers []Header) []Header {
	out := make([]Header, 0, len(headers))
	for _, h := range headers {
		if !strings.HasPrefix(h.Key, HeaderPrefix) {
			out = append(out, h)
		}
	}
	return out
}
