package checker

// payloads.go owns CheckPayloads: the promises of large payloads (issue
// 21) over what the large-payloads family recorded outside the history
// (its own producer, consumer and final read; chaos/runner/faults_large.go).
//
// The anomalies are defined in the chaos package doc ("Large payloads").
//
// Invariant: a pure function of its input; an unknown publish outcome is
// neither acknowledged nor orphaned, and judged by nothing here.

import (
	"fmt"
	"sort"
)

// AckedPayload is an envelope the cluster acknowledged.
type AckedPayload struct {
	Ref, SHA256 string
	Size        int64
	Partition   int32
	Offset      int64
}

// PayloadRead is what reading an acknowledged envelope's object back
// after the run found (Err empty when it read to its end).
type PayloadRead struct {
	Size   int64
	SHA256 string
	Err    string
}

// PayloadRun is everything the family recorded.
type PayloadRun struct {
	Acked   []AckedPayload
	Orphans []string // references uploaded and never published
	// Log is the final log of the side topic: the reference each
	// envelope names, by partition and offset ("" for a record that names
	// none).
	Log map[int32]map[int64]string
	// Reads are the final reads of the acknowledged envelopes' objects,
	// by reference.
	Reads map[string]PayloadRead
	// Committed is the consumer group's committed offset by partition at
	// the end; Verified the references its handler read to a verified end.
	Committed map[int32]int64
	Verified  map[string]bool
}

// CheckPayloads lists the anomalies of run, sorted.
func CheckPayloads(run PayloadRun) []string {
	var out []string
	for _, a := range run.Acked {
		if got := run.Log[a.Partition][a.Offset]; got != a.Ref {
			out = append(out, fmt.Sprintf("payload-lost: %s acknowledged at %d/%d, the final log holds %q there", a.Ref, a.Partition, a.Offset, got))
			continue
		}
		rd, ok := run.Reads[a.Ref]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("payload-lost: %s (%d/%d) was not read back", a.Ref, a.Partition, a.Offset))
		case rd.Err != "":
			out = append(out, fmt.Sprintf("payload-lost: %s (%d/%d) cannot be read back: %s", a.Ref, a.Partition, a.Offset, rd.Err))
		case rd.Size != a.Size || rd.SHA256 != a.SHA256:
			out = append(out, fmt.Sprintf("payload-corrupt: %s (%d/%d) reads back %d bytes with sha256 %s, acknowledged %d with %s",
				a.Ref, a.Partition, a.Offset, rd.Size, rd.SHA256, a.Size, a.SHA256))
		}
		if c, ok := run.Committed[a.Partition]; ok && c > a.Offset && !run.Verified[a.Ref] {
			out = append(out, fmt.Sprintf("commit-past-unverified: partition %d committed at %d, past %s at %d, which the consumer never verified",
				a.Partition, c, a.Ref, a.Offset))
		}
	}
	published := map[string]bool{}
	for _, offs := range run.Log {
		for _, r := range offs {
			published[r] = true
		}
	}
	for _, o := range run.Orphans {
		if o != "" && published[o] {
			out = append(out, fmt.Sprintf("orphan-published: %s was never published, yet the final log names it", o))
		}
	}
	sort.Strings(out)
	return out
}
