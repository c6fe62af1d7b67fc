package console

// This file owns the message browser: a page of one partition's records
// from an offset, or from the first record at or after a time, each with
// its key, headers and value shown as text, JSON or hex, and a large
// payload's reference (payload/ref's envelope headers) with the link that
// downloads it (GET /v1/objects/{ref}, which authorises the caller).
//
//	/ui/messages/{topic}?partition=P&offset=O|time=T&format=text|json|hex&limit=N
//
// The records come from GET /v1/topics/{topic}/messages (READ on the
// topic). A time (RFC 3339, or milliseconds since the epoch) is found by a
// binary search of one-record reads over [log start, log end): the first
// offset whose record's timestamp is at or after it, assuming timestamps
// grow with offsets as the broker's LogAppendTime and most producers give.
//
// Invariant: read-only; at most maxBrowse records a page and
// maxSearchSteps reads a time search.

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/payload/ref"
)

const (
	defaultBrowse  = 20
	maxBrowse      = 200
	maxSearchSteps = 64
)

// messagesPage is the browser's content.
type messagesPage struct {
	Topic     string
	Partition int32
	Format    string
	Offset    string
	Time      string
	Limit     int
	LogStart  int64
	LogEnd    int64
	Next      int64
	Prev      int64
	Records   []shownRecord
}

type shownRecord struct {
	Offset      int64
	TimestampMs int64
	Key         string
	KeyNote     string
	Headers     [][2]string
	Value       shown
	Size        int
	Ref         *ref.Ref
	RefURL      string
	History     string
}

func (q *request) messages(topic string) {
	qv := q.r.URL.Query()
	p := page{Title: "Messages of " + topic, Nav: "topics"}
	mp := messagesPage{Topic: topic, Format: qv.Get("format"), Offset: qv.Get("offset"), Time: qv.Get("time"), Limit: defaultBrowse}
	if mp.Format != "json" && mp.Format != "hex" {
		mp.Format = "text"
	}
	if v, err := strconv.ParseInt(qv.Get("partition"), 10, 32); err == nil && v >= 0 {
		mp.Partition = int32(v)
	}
	if v, err := strconv.Atoi(qv.Get("limit")); err == nil && v > 0 {
		mp.Limit = min(v, maxBrowse)
	}
	list := func(from int64, limit int) (messagesAnswer, error) {
		var m messagesAnswer
		v := url.Values{"partition": {fmt.Sprint(mp.Partition)}, "limit": {fmt.Sprint(limit)}}
		if from >= 0 {
			v.Set("offset", fmt.Sprint(from))
		}
		err := q.api.get(q.ctx(), "/v1/topics/"+escape(topic)+"/messages", v, &m)
		return m, err
	}
	from := int64(-1)
	if mp.Offset != "" {
		o, err := strconv.ParseInt(mp.Offset, 10, 64)
		if err != nil || o < 0 {
			q.render(http.StatusBadRequest, "error", page{Title: p.Title, Error: fmt.Sprintf("offset %q is not a non-negative integer", mp.Offset)})
			return
		}
		from = o
	} else if mp.Time != "" {
		at, err := parseTime(mp.Time)
		if err != nil {
			q.render(http.StatusBadRequest, "error", page{Title: p.Title, Error: err.Error()})
			return
		}
		if from, err = q.searchTime(list, at); err != nil {
			q.fail(p.Title, err)
			return
		}
	}
	m, err := list(from, mp.Limit)
	if err != nil {
		q.fail(p.Title, err)
		return
	}
	mp.LogStart, mp.LogEnd, mp.Next = m.LogStart, m.LogEnd, m.NextOffset
	first := m.NextOffset
	if len(m.Messages) > 0 {
		first = m.Messages[0].Offset
	}
	mp.Prev = max(m.LogStart, first-int64(mp.Limit))
	for _, rec := range m.Messages {
		sr := shownRecord{Offset: rec.Offset, TimestampMs: rec.TimestampMs}
		switch {
		case rec.MessageKey != nil:
			sr.Key = *rec.MessageKey
		case rec.KeyBase64 != nil:
			sr.Key, sr.KeyNote = *rec.KeyBase64, "base64 (not UTF-8)"
		default:
			sr.KeyNote = "no key"
		}
		var hs []ref.Header
		for k, v := range rec.Headers {
			sr.Headers = append(sr.Headers, [2]string{k, v})
			hs = append(hs, ref.Header{Key: k, Value: []byte(v)})
		}
		if rec.MessageID != "" {
			sr.Headers = append(sr.Headers, [2]string{"message id", rec.MessageID})
		}
		sort.Slice(sr.Headers, func(i, j int) bool { return sr.Headers[i][0] < sr.Headers[j][0] })
		if r, ok, err := ref.Parse(hs); ok && err == nil {
			sr.Ref, sr.RefURL = &r, "/v1/objects/"+url.PathEscape(r.ID)
		}
		value, err := base64.StdEncoding.DecodeString(rec.PayloadBase64)
		if err != nil {
			sr.Value = shown{Format: "text", Note: "the API's payload_base64 did not decode: " + err.Error()}
		} else {
			sr.Size, sr.Value = len(value), show(value, mp.Format)
		}
		if h := rec.History; h != nil {
			sr.History = fmt.Sprintf("from %s/%d@%d, group %s, %d attempts, %s: %s %s", h.SourceTopic, h.SourcePartition,
				h.SourceOffset, h.Group, h.Attempts, h.ErrorClass, h.LastError, h.DeadReason)
		} else if rec.HistoryError != "" {
			sr.History = "malformed retry history: " + rec.HistoryError
		}
		mp.Records = append(mp.Records, sr)
	}
	p.Content = mp
	q.render(http.StatusOK, "messages", p)
}

// parseTime reads RFC 3339 or milliseconds since the epoch.
func parseTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q is neither RFC 3339 (2026-12-02T15:04:05Z) nor milliseconds since the epoch", s)
}

// searchTime is the first offset whose record is at or after at (the log
// end when none is).
func (q *request) searchTime(list func(from int64, limit int) (messagesAnswer, error), at time.Time) (int64, error) {
	m, err := list(-1, 1)
	if err != nil {
		return 0, err
	}
	lo, hi := m.LogStart, m.LogEnd // the answer is in [lo, hi]
	want := at.UnixMilli()
	for step := 0; lo < hi && step < maxSearchSteps; step++ {
		mid := lo + (hi-lo)/2
		r, err := list(mid, 1)
		if err != nil {
			return 0, err
		}
		if len(r.Messages) == 0 {
			hi = mid
			continue
		}
		got := r.Messages[0]
		// Every record below lo is before at; the first record at or
		// after hi (mid here: got is the first record at or after it) is
		// not.
		if got.TimestampMs >= want {
			hi = mid
		} else {
			lo = got.Offset + 1
		}
	}
	return lo, nil
}
