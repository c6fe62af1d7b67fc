package console

// This file owns how a page reads the JSON API: an in-process request
// through the API's pipeline, carrying the caller's credentials (or, for
// the sampler, the broker's own identity), answered into memory. The JSON
// shapes below are the subsets of the API's answers the pages show
// (broker/httpapi/openapi.json describes them whole).
//
// Invariant: an API error is returned as *apiError with its status, code
// and message, never as an empty page; a body is bounded by maxAnswer.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// maxAnswer bounds one API answer held in memory.
const maxAnswer = 16 << 20

// apiError is an answer of the API other than 200.
type apiError struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *apiError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.Status, e.Code)
}

// decodeAPIError is the error of an answer with status and body: the API
// answers {"error":{"code","message"}} (broker/httpapi/apierr); the flat
// {"error","message"} is read too.
func decodeAPIError(status int, body []byte) *apiError {
	ae := &apiError{Status: status}
	var nested struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &nested) == nil && (nested.Error.Code != "" || nested.Error.Message != "") {
		ae.Code, ae.Message = nested.Error.Code, nested.Error.Message
		return ae
	}
	_ = json.Unmarshal(body, ae)
	return ae
}

// recorder is an in-memory http.ResponseWriter.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	over   bool
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(p) > maxAnswer {
		r.over = true
		return 0, fmt.Errorf("console: answer over %d bytes", maxAnswer)
	}
	return r.body.Write(p)
}

// api calls the JSON API as one caller.
type api struct {
	h    http.Handler  // the API's pipeline, or the system handler
	orig *http.Request // the console request whose credentials are used; nil for the system
}

// get asks GET path?query and decodes a 200 answer into out.
func (a api) get(ctx context.Context, path string, query url.Values, out any) error {
	return a.do(ctx, http.MethodGet, path, query, nil, http.StatusOK, out)
}

// post asks POST path with body as JSON and decodes an answer of status
// want into out.
func (a api) post(ctx context.Context, path string, body any, want int, out any) error {
	return a.do(ctx, http.MethodPost, path, nil, body, want, out)
}

func (a api) do(ctx context.Context, method, path string, query url.Values, body any, want int, out any) error {
	u := &url.URL{Path: path, RawQuery: query.Encode()}
	var rd io.Reader = http.NoBody // a handler may read the body, as of a server's request
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("console: %s: %w", path, err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("console: %s: %w", path, err)
	}
	if a.orig != nil {
		req.Header = http.Header{}
		for _, h := range []string{"Authorization", "X-Forwarded-For"} {
			if v := a.orig.Header.Values(h); len(v) > 0 {
				req.Header[h] = v
			}
		}
		req.RemoteAddr, req.TLS, req.Host = a.orig.RemoteAddr, a.orig.TLS, a.orig.Host
	} else {
		req.RemoteAddr = "127.0.0.1:0"
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}}
	a.h.ServeHTTP(rec, req)
	if rec.over {
		return fmt.Errorf("console: %s: the answer is over %d bytes", path, maxAnswer)
	}
	if rec.status != want {
		return decodeAPIError(rec.status, rec.body.Bytes())
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("console: decode %s: %w", path, err)
	}
	return nil
}

// escape is a name as one path segment.
func escape(name string) string { return url.PathEscape(name) }

// The API's answers, as far as the pages show them.

type brokersAnswer struct {
	Controller int32          `json:"controller"`
	Brokers    []brokerAnswer `json:"brokers"`
}

type brokerAnswer struct {
	ID          int32  `json:"id"`
	AZ          string `json:"az"`
	Pool        string `json:"pool"`
	Kafka       string `json:"kafka"`
	HTTP        string `json:"http"`
	InterBroker string `json:"inter_broker"`
	StartedMs   int64  `json:"started_ms"`
	Controller  bool   `json:"controller"`
	Live        bool   `json:"live"`
}

// healthAnswer is GET /v1/brokers/{id}/health (broker/httpapi/healthapi).
type healthAnswer struct {
	Node int32 `json:"node"`
	Etcd struct {
		OK          bool    `json:"ok"`
		RoundTripMs float64 `json:"round_trip_ms"`
		Error       string  `json:"error"`
	} `json:"etcd"`
	Disk struct {
		Level   int    `json:"level"`
		Meaning string `json:"meaning"`
	} `json:"disk"`
	Fsync struct {
		Count      uint64   `json:"count"`
		P50Seconds *float64 `json:"p50_seconds"`
		P99Seconds *float64 `json:"p99_seconds"`
	} `json:"fsync"`
}

type topicsAnswer struct {
	Topics []struct {
		Name              string `json:"name"`
		TopicID           string `json:"topic_id"`
		Partitions        int32  `json:"partitions"`
		ReplicationFactor int16  `json:"replication_factor"`
		Tiered            bool   `json:"tiered"`
	} `json:"topics"`
}

type partitionAnswer struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	InSync         []int32 `json:"in_sync"`
	Offline        []int32 `json:"offline_replicas"`
	HighWatermark  *int64  `json:"high_watermark"`
	LogStart       int64   `json:"log_start"`
	LocalLogStart  int64   `json:"local_log_start"`
	LocalBytes     int64   `json:"local_bytes"`
	RemoteLogStart int64   `json:"remote_log_start"`
	RemoteEnd      int64   `json:"remote_end"`
	RemoteBytes    int64   `json:"remote_bytes"`
	RemoteError    string  `json:"remote_error"`
	StatsError     string  `json:"stats_error"`
}

// UploadLag is the offsets at the leader not yet in the remote log.
func (p partitionAnswer) UploadLag() int64 {
	if p.HighWatermark == nil || p.RemoteEnd <= 0 {
		return 0
	}
	return max(0, *p.HighWatermark-p.RemoteEnd)
}

type topicAnswer struct {
	Name              string            `json:"name"`
	TopicID           string            `json:"topic_id"`
	ReplicationFactor int16             `json:"replication_factor"`
	Tiered            bool              `json:"tiered"`
	Partitions        []partitionAnswer `json:"partitions"`
	Configs           []struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		IsDefault bool   `json:"is_default"`
	} `json:"configs"`
}

// config is the value of a topic config, "" when absent.
func (t topicAnswer) config(name string) string {
	for _, c := range t.Configs {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

type hotKeysAnswer struct {
	WindowSeconds float64 `json:"window_seconds"`
	Counters      int     `json:"counters"`
	Partitions    []struct {
		Partition     int32   `json:"partition"`
		Leader        int32   `json:"leader"`
		BytesPerSec   float64 `json:"bytes_per_sec"`
		RecordsPerSec float64 `json:"records_per_sec"`
		Keys          []struct {
			Key           string  `json:"key"`
			KeyBase64     string  `json:"key_base64"`
			RecordsPerSec float64 `json:"records_per_sec"`
		} `json:"keys"`
		Error string `json:"error"`
	} `json:"partitions"`
}

type groupsAnswer struct {
	Groups []struct {
		Group        string `json:"group"`
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
		Coordinator  int32  `json:"coordinator"`
	} `json:"groups"`
	Errors []struct {
		Node    int32  `json:"node"`
		Message string `json:"message"`
	} `json:"errors"`
}

type groupAnswer struct {
	Group        string `json:"group"`
	Coordinator  int32  `json:"coordinator"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	Members      []struct {
		MemberID   string `json:"member_id"`
		InstanceID string `json:"instance_id"`
		ClientID   string `json:"client_id"`
		ClientHost string `json:"client_host"`
		Assignment []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"assignment"`
	} `json:"members"`
}

type lagPartition struct {
	Topic          string   `json:"topic"`
	Partition      int32    `json:"partition"`
	Committed      int64    `json:"committed"`
	LogEnd         int64    `json:"log_end"`
	Lag            int64    `json:"lag"`
	LagBytes       int64    `json:"lag_bytes"`
	OldestAgeMs    int64    `json:"oldest_unconsumed_age_ms"`
	CommitRate     *float64 `json:"commit_rate_per_second"`
	CatchUpSeconds *float64 `json:"catch_up_seconds"`
	Error          string   `json:"error"`
}

type lagAnswer struct {
	Group      string         `json:"group"`
	Partitions []lagPartition `json:"partitions"`
}

type messagesAnswer struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	LogStart   int64  `json:"log_start"`
	LogEnd     int64  `json:"log_end"`
	NextOffset int64  `json:"next_offset"`
	Messages   []struct {
		Offset        int64             `json:"offset"`
		TimestampMs   int64             `json:"timestamp_ms"`
		MessageKey    *string           `json:"message_key"`
		KeyBase64     *string           `json:"key_base64"`
		MessageID     string            `json:"message_id"`
		Headers       map[string]string `json:"headers"`
		PayloadBase64 string            `json:"payload_base64"`
		History       *struct {
			SourceTopic     string `json:"source_topic"`
			SourcePartition int32  `json:"source_partition"`
			SourceOffset    int64  `json:"source_offset"`
			Group           string `json:"group"`
			Attempts        int    `json:"attempts"`
			ErrorClass      string `json:"error_class"`
			LastError       string `json:"last_error"`
			DeadReason      string `json:"dead_reason"`
		} `json:"history"`
		HistoryError string `json:"history_error"`
	} `json:"messages"`
}
