package queue

// This file owns the pure core of a dead-letter redrive (broker/redrive
// runs it): the scope a redrive takes of a DLQ, frozen when it starts; the
// partition of the target a dead letter goes to; the headers of a
// redriven copy; and the sluice.redrive.source header that names the DLQ
// record a copy came from, which a restarted redrive reads back from the
// target so that it never publishes one twice.
//
//	sluice.redrive.source   "<job id>/<dlq partition>/<dlq offset>"
//
// A redriven copy keeps the dead letter's key, value, timestamp, message
// id and other headers; its sluice.retry.* headers are dropped (the
// history stays in the DLQ: the copy is a fresh first delivery) and any
// earlier sluice.redrive.source is replaced.
//
// Invariant: a scope is frozen: Ends(hw) bounds every partition at the
// high watermark it had when the redrive started (and at ToOffset), so
// records dead-lettered later are never taken, however long it runs.
// Invariant: ParseRedriveSource(RedriveSource(j, p, o)) == (j, p, o) for
// every valid job id; it refuses anything else with an error and never
// panics (fuzzed).

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// HeaderRedriveSource names the DLQ record a redriven copy came from.
const HeaderRedriveSource = "sluice.redrive.source"

// MaxRedriveRate bounds a redrive's records per second per partition.
const MaxRedriveRate = 100_000

// RedriveScope is what a redrive takes of a DLQ: the records of every
// partition in [FromOffset, ToOffset) dead-lettered in [FromMs, ToMs), of
// key Key (when HasKey) and of last error class Class (when set). A zero
// bound is no bound.
type RedriveScope struct {
	FromOffset int64 // 0: from the log start
	ToOffset   int64 // 0: to the high watermark at the start
	FromMs     int64 // unix ms, inclusive; 0: no bound
	ToMs       int64 // unix ms, exclusive; 0: no bound
	HasKey     bool
	Key        []byte
	Class      string
}

// Validate checks a scope's bounds and class.
func (s RedriveScope) Validate() error {
	switch {
	case s.FromOffset < 0 || s.ToOffset < 0:
		return fmt.Errorf("redrive scope: offsets %d..%d: want offsets ≥ 0", s.FromOffset, s.ToOffset)
	case s.ToOffset != 0 && s.ToOffset <= s.FromOffset:
		return fmt.Errorf("redrive scope: to offset %d is not after from offset %d", s.ToOffset, s.FromOffset)
	case s.FromMs < 0 || s.ToMs < 0:
		return fmt.Errorf("redrive scope: times %d..%d: want unix ms ≥ 0", s.FromMs, s.ToMs)
	case s.ToMs != 0 && s.ToMs <= s.FromMs:
		return fmt.Errorf("redrive scope: to time %d is not after from time %d", s.ToMs, s.FromMs)
	}
	if s.Class != "" {
		if err := ValidateClass(s.Class); err != nil {
			return fmt.Errorf("redrive scope: class: %w", err)
		}
	}
	return nil
}

// Start is where a partition whose log starts at logStart is read from.
func (s RedriveScope) Start(logStart int64) int64 { return max(logStart, s.FromOffset) }

// Ends freezes the scope: each partition's end is its high watermark now,
// or ToOffset when that is lower.
func (s RedriveScope) Ends(hw map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(hw))
	for p, end := range hw {
		if s.ToOffset != 0 {
			end = min(end, s.ToOffset)
		}
		out[p] = end
	}
	return out
}

// DeadAt is when a record was dead-lettered: the due time its retry
// headers record, or its timestamp when they do not parse.
func DeadAt(timestampMs int64, headers []Header) int64 {
	if m, ok, err := Parse(headers); ok && err == nil {
		return m.Due.UnixMilli()
	}
	return timestampMs
}

// LastClass is a dead letter's last error class, "" when its retry headers
// do not parse.
func LastClass(headers []Header) string {
	if m, ok, err := Parse(headers); ok && err == nil {
		return m.Last().Class
	}
	return ""
}

// Match reports whether a DLQ record is in the scope.
func (s RedriveScope) Match(offset, timestampMs int64, key []byte, headers []Header) bool {
	if offset < s.FromOffset || (s.ToOffset != 0 && offset >= s.ToOffset) {
		return false
	}
	if s.HasKey && (key == nil || !bytes.Equal(key, s.Key)) {
		return false
	}
	if s.FromMs != 0 || s.ToMs != 0 {
		at := DeadAt(timestampMs, headers)
		if at < s.FromMs || (s.ToMs != 0 && at >= s.ToMs) {
			return false
		}
	}
	return s.Class == "" || LastClass(headers) == s.Class
}

// RedrivePartition is the target partition of a dead letter read from DLQ
// partition dlqPartition: its source partition (from its retry headers),
// or its DLQ partition when they do not parse, modulo the target's
// partitions. A redrive to the source topic puts each record back where
// it came from, so records of one key stay in one partition.
func RedrivePartition(headers []Header, dlqPartition, targetPartitions int32) int32 {
	p := dlqPartition
	if m, ok, err := Parse(headers); ok && err == nil {
		p = m.SourcePartition
	}
	if targetPartitions <= 0 {
		return 0
	}
	return p % targetPartitions
}

// RedriveSource is the value of a copy's sluice.redrive.source header.
func RedriveSource(job string, partition int32, offset int64) string {
	return job + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(offset, 10)
}

// ValidateRedriveID checks a redrive job's id: 1–64 of [a-z0-9-].
func ValidateRedriveID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("redrive id %q: want 1 to 64 characters", id)
	}
	for _, r := range id {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return fmt.Errorf("redrive id %q: want only a-z, 0-9 and '-'", id)
		}
	}
	return nil
}

// errRedriveSource is the error of a malformed sluice.redrive.source.
var errRedriveSource = errors.New("not <job id>/<partition>/<offset>")

// ParseRedriveSource reads a sluice.redrive.source header's value.
func ParseRedriveSource(v string) (job string, partition int32, offset int64, err error) {
	parts := strings.Split(v, "/")
	if len(parts) != 3 {
		return "", 0, 0, fmt.Errorf("header %s %q: %w", HeaderRedriveSource, v, errRedriveSource)
	}
	if err := ValidateRedriveID(parts[0]); err != nil {
		return "", 0, 0, fmt.Errorf("header %s: %w", HeaderRedriveSource, err)
	}
	p, err1 := strconv.ParseInt(parts[1], 10, 32)
	o, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < 0 || strconv.FormatInt(p, 10) != parts[1] || strconv.FormatInt(o, 10) != parts[2] {
		return "", 0, 0, fmt.Errorf("header %s %q: %w", HeaderRedriveSource, v, errRedriveSource)
	}
	return parts[0], int32(p), o, nil
}

// RedriveHeaders are the headers of the copy of a dead letter of job read
// at (partition, offset): its headers without sluice.retry.* and
// sluice.redrive.source, then the new sluice.redrive.source.
func RedriveHeaders(headers []Header, job string, partition int32, offset int64) []Header {
	out := make([]Header, 0, len(headers)+1)
	for _, h := range headers {
		if strings.HasPrefix(h.Key, HeaderPrefix) || h.Key == HeaderRedriveSource {
			continue
		}
		out = append(out, h)
	}
	return append(out, Header{HeaderRedriveSource, []byte(RedriveSource(job, partition, offset))})
}

// RedrivenOffset reports the DLQ offset a target record names as job's
// copy of DLQ partition partition, and false when it is not one (another
// job's, another partition's, no header or a malformed one).
func RedrivenOffset(headers []Header, job string, partition int32) (int64, bool) {
	for _, h := range headers {
		if h.Key != HeaderRedriveSource {
			continue
		}
		j, p, o, err := ParseRedriveSource(string(h.Value))
		if err != nil || j != job || p != partition {
			return 0, false
		}
		return o, true
	}
	return 0, false
}

// RedriveDone reports whether every partition's cursor reached its frozen
// end.
func RedriveDone(cursors, ends map[int32]int64) bool {
	for p, end := range ends {
		if cursors[p] < end {
			return false
		}
	}
	return true
}
