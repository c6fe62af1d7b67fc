package healthapi

// This file owns the health answer (doc.go draws it), how a broker reads
// its own, and the two handlers.
//
// Invariant: read-only; a figure that cannot be read is said so (etcd's
// error, a null quantile), never shown as zero.
// Invariant: the public handler answers within PeerTimeout of being asked
// about another broker, whether or not that broker answers.
//
// No state of its own: each answer is read when asked.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/node"
)

const (
	// Route is the public route's pattern, InternalPath the inter-broker one.
	Route        = "GET /v1/brokers/{id}/health"
	InternalPath = "/internal/v1/health"
	// PeerTimeout bounds asking another broker for its health.
	PeerTimeout = time.Second
	// etcdTimeout bounds the etcd read, well within PeerTimeout.
	etcdTimeout = 500 * time.Millisecond
	// fsyncMetric is the histogram the fsync quantiles are read from.
	fsyncMetric = "sluice_wal_fsync_duration_seconds"
)

// Health is one broker's health (doc.go).
type Health struct {
	Node  int32 `json:"node"`
	Etcd  Etcd  `json:"etcd"`
	Disk  Disk  `json:"disk"`
	Fsync Fsync `json:"fsync"`
}

// Etcd is the round trip of one etcd read, or why it failed.
type Etcd struct {
	OK          bool    `json:"ok"`
	RoundTripMs float64 `json:"round_trip_ms,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// Disk is the disk-watermark ladder's level.
type Disk struct {
	Level   int    `json:"level"`
	Meaning string `json:"meaning"`
}

// Fsync is the WAL's fsync latency: quantile bounds (doc.go says when
// they are null).
type Fsync struct {
	Count                uint64   `json:"count"`
	P50Seconds           *float64 `json:"p50_seconds"`
	P99Seconds           *float64 `json:"p99_seconds"`
	LargestBucketSeconds float64  `json:"largest_bucket_seconds,omitempty"`
}

// DiskLevels is what each disk-watermark level means, by level.
var DiskLevels = []string{"none", "no new topics or partitions", "no bursts for low-priority tenants", "publishes over quota refused"}

// Local reads n's own health.
func Local(ctx context.Context, n *node.Node) Health {
	h := Health{Node: n.Cfg.NodeID, Disk: Disk{Level: n.DiskLevel()}}
	if h.Disk.Level >= 0 && h.Disk.Level < len(DiskLevels) {
		h.Disk.Meaning = DiskLevels[h.Disk.Level]
	}
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	start := time.Now()
	if _, _, err := n.Store.ControllerID(ctx); err != nil {
		h.Etcd.Error = err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			h.Etcd.Error = fmt.Sprintf("no answer within %s: %v", etcdTimeout, err)
		}
	} else {
		h.Etcd.OK = true
		h.Etcd.RoundTripMs = float64(time.Since(start).Microseconds()) / 1000
	}
	h.Fsync = fsyncOf(n)
	return h
}

// fsyncOf reads the fsync histogram from n's metrics registry.
func fsyncOf(n *node.Node) Fsync {
	var f Fsync
	if n.M == nil {
		return f
	}
	fams, err := n.M.Reg.Gather()
	if err != nil {
		n.Logger.Debug().Err(err).Msg("health: gather metrics")
	}
	for _, fam := range fams {
		if fam.GetName() != fsyncMetric || len(fam.GetMetric()) == 0 {
			continue
		}
		hist := fam.GetMetric()[0].GetHistogram()
		buckets := hist.GetBucket()
		if len(buckets) > 0 {
			f.LargestBucketSeconds = buckets[len(buckets)-1].GetUpperBound()
		}
		bounds := make([]float64, len(buckets))
		counts := make([]uint64, len(buckets))
		for i, b := range buckets {
			bounds[i], counts[i] = b.GetUpperBound(), b.GetCumulativeCount()
		}
		f.Count = hist.GetSampleCount()
		f.P50Seconds = quantile(bounds, counts, f.Count, 0.5)
		f.P99Seconds = quantile(bounds, counts, f.Count, 0.99)
	}
	return f
}

// quantile is the upper bound of the histogram bucket holding quantile q
// of total samples (a bound, as a histogram allows: "p99 ≤ 2ms"), given
// the buckets' bounds and cumulative counts in order; nil when there is
// no sample or the quantile lies beyond the last bucket.
func quantile(bounds []float64, cumulative []uint64, total uint64, q float64) *float64 {
	if total == 0 {
		return nil
	}
	want := uint64(math.Ceil(q * float64(total)))
	for i, c := range cumulative {
		if c >= want && !math.IsInf(bounds[i], 1) {
			b := bounds[i]
			return &b
		}
	}
	return nil
}

// Asker asks broker id's inter-broker listener method pathQuery with body
// (nil: none) and decodes its 200 answer into out; the HTTP front end's
// own peer call.
type Asker func(ctx context.Context, id int32, method, pathQuery string, body, out any) error

// ErrorWriter answers err as the API's error body.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// Public is the handler of Route: n's own health, or another broker's
// asked with ask.
func Public(n *node.Node, ask Asker, writeError ErrorWriter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
		if err != nil {
			writeError(w, r, apierr.BadRequest("broker id %q is not a number", r.PathValue("id")))
			return
		}
		if int32(id) == n.Cfg.NodeID {
			write(w, Local(r.Context(), n))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), PeerTimeout)
		defer cancel()
		var h Health
		if err := ask(ctx, int32(id), http.MethodGet, InternalPath, nil, &h); err != nil {
			// The peer call's own refusals (not live, the dial failed)
			// are 503 peer_unreachable already; a timeout is made one.
			var ae *apierr.Error
			if !errors.As(err, &ae) {
				err = apierr.Errorf(http.StatusServiceUnavailable, "peer_unreachable",
					"broker %d did not answer within %s: %v", id, PeerTimeout, err)
			}
			writeError(w, r, err)
			return
		}
		write(w, h)
	}
}

// Internal is the handler of InternalPath: n's own health.
func Internal(n *node.Node) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { write(w, Local(r.Context(), n)) }
}

func write(w http.ResponseWriter, h Health) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(h)
}
