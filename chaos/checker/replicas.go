package checker

// This file owns the checks on logs as a whole: replica-divergence between
// brokers' logs, epoch-regression in the final log and in each replica's
// log, and tiered-read-mismatch against the final log (definitions in
// chaos/doc.go).

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sluice-mq/sluice/chaos/history"
)

// checkReplicas reports replica-divergence: at an offset inside every
// compared replica's [log start, HW), all of them hold a record with the same
// digest and (where both know it) leader epoch. One anomaly per offset.
func checkReplicas(x *index, c *collector) {
	for _, p := range sortedPartitions(x.replicas) {
		byBroker := x.replicas[p]
		brokers := sortedBrokers(byBroker)
		seen := make(map[history.Offset]bool)
		var offsets []history.Offset
		for _, b := range brokers {
			for o := range byBroker[b].entries {
				if !seen[o] {
					seen[o] = true
					offsets = append(offsets, o)
				}
			}
		}
		sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
		for _, o := range offsets {
			var in []history.BrokerID
			for _, b := range brokers {
				if r := byBroker[b]; r.logStart <= o && o < r.hw {
					in = append(in, b)
				}
			}
			if len(in) < 2 || agree(byBroker, in, o) {
				continue
			}
			var parts []string
			var idxs []int
			for _, b := range in {
				e, ok := byBroker[b].entries[o]
				if !ok {
					parts = append(parts, fmt.Sprintf("broker %d: no record", b))
					continue
				}
				parts = append(parts, fmt.Sprintf("broker %d: digest %s epoch %d", b, e.Digest, e.Epoch))
				idxs = append(idxs, e.idx)
			}
			c.add(Anomaly{Kind: ReplicaDivergence, Partition: p, Offsets: []history.Offset{o},
				Detail: fmt.Sprintf("replicas disagree at offset %d, below each one's high watermark: %s", o, strings.Join(parts, "; "))},
				idxs...)
		}
	}
}

func agree(byBroker map[history.BrokerID]*replica, in []history.BrokerID, o history.Offset) bool {
	ref, refOK := byBroker[in[0]].entries[o]
	for _, b := range in[1:] {
		e, ok := byBroker[b].entries[o]
		if ok != refOK {
			return false
		}
		if ok && (e.Digest != ref.Digest || (e.Epoch >= 0 && ref.Epoch >= 0 && e.Epoch != ref.Epoch)) {
			return false
		}
	}
	return true
}

// checkEpochs reports epoch-regression: in offset order, each known leader
// epoch is at least the previous known one, in the final log and in every
// replica's log. One anomaly per step down.
func checkEpochs(x *index, c *collector) {
	for _, p := range sortedPartitions(x.logs) {
		l := x.logs[p]
		prev, prevAt := history.NoEpoch, history.NoOffset
		for _, o := range l.offsets {
			r := l.at[o]
			if r.epoch < 0 {
				continue
			}
			if r.epoch < prev {
				c.add(Anomaly{Kind: EpochRegression, Partition: p, Offsets: []history.Offset{prevAt, o},
					Keys: []string{r.key}, Values: []string{r.value},
					Detail: fmt.Sprintf("the final log has leader epoch %d at offset %d, after epoch %d at offset %d", r.epoch, o, prev, prevAt)},
					l.at[prevAt].idx, r.idx)
			}
			prev, prevAt = r.epoch, o
		}
	}
	for _, p := range sortedPartitions(x.replicas) {
		byBroker := x.replicas[p]
		for _, b := range sortedBrokers(byBroker) {
			r := byBroker[b]
			offsets := make([]history.Offset, 0, len(r.entries))
			for o := range r.entries {
				offsets = append(offsets, o)
			}
			sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
			prev, prevAt := history.NoEpoch, history.NoOffset
			for _, o := range offsets {
				e := r.entries[o]
				if e.Epoch < 0 {
					continue
				}
				if e.Epoch < prev {
					c.add(Anomaly{Kind: EpochRegression, Partition: p, Offsets: []history.Offset{prevAt, o},
						Detail: fmt.Sprintf("broker %d's log has leader epoch %d at offset %d, after epoch %d at offset %d", b, e.Epoch, o, prev, prevAt)},
						r.entries[prevAt].idx, e.idx)
				}
				prev, prevAt = e.Epoch, o
			}
		}
	}
}

// checkTiered reports tiered-read-mismatch: within the final log's checked
// range [log start, drain end), a tiered read returns exactly the records the
// drain returned, in its [from, to); and nothing at or above the final HW.
func checkTiered(x *index, c *collector) {
	for _, ti := range x.tiered {
		t := x.h[ti].(history.TieredRead)
		l := x.logs[t.Partition]
		if l == nil {
			continue // noted as unchecked
		}
		got := make(map[history.Offset]bool, len(t.Records))
		for _, r := range t.Records {
			got[r.Offset] = true
			if r.Offset < l.logStart || (r.Offset >= l.covered && r.Offset < l.hw) {
				continue
			}
			var why string
			idxs := []int{ti}
			if r.Offset >= l.hw {
				why = fmt.Sprintf("at or above the final high watermark %d", l.hw)
			} else if f, ok := l.at[r.Offset]; !ok {
				why = "where the final drain returned no record"
			} else if f.value != r.Value || f.key != r.Key {
				why = fmt.Sprintf("where the final drain returned key %q value %q", f.key, f.value)
				idxs = append(idxs, f.idx)
			}
			if why == "" {
				continue
			}
			c.add(Anomaly{Kind: TieredReadMismatch, Partition: t.Partition, Offsets: []history.Offset{r.Offset},
				Keys: []string{r.Key}, Values: []string{r.Value},
				Detail: fmt.Sprintf("the tiered read returned key %q value %q at offset %d, %s", r.Key, r.Value, r.Offset, why)},
				append(idxs, l.finalIdx)...)
		}
		from, to := max(t.From, l.logStart), min(t.To, l.covered)
		i := sort.Search(len(l.offsets), func(i int) bool { return l.offsets[i] >= from })
		for ; i < len(l.offsets) && l.offsets[i] < to; i++ {
			o := l.offsets[i]
			if got[o] {
				continue
			}
			f := l.at[o]
			c.add(Anomaly{Kind: TieredReadMismatch, Partition: t.Partition, Offsets: []history.Offset{o},
				Keys: []string{f.key}, Values: []string{f.value},
				Detail: fmt.Sprintf("the tiered read of [%d, %d) did not return offset %d, where the final drain returned %q", t.From, t.To, o, f.value)},
				ti, f.idx)
		}
	}
}

func sortedBrokers(m map[history.BrokerID]*replica) []history.BrokerID {
	bs := make([]history.BrokerID, 0, len(m))
	for b := range m {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i] < bs[j] })
	return bs
}
