package tier

// retention.go is the retention state machine's pure core: from what a
// partition holds locally and remotely, its settings, the readers' pins and
// the time, it decides every deletion as watermarks that only move forward
// (docs/architecture.md). The executor (machine.go) carries the decisions out and
// records them in the head; nothing else in Sluice deletes data.
//
// Invariant: a local segment is deleted only if it is sealed, wholly below
// the high watermark and below the lowest pinned offset, and either past
// total retention (retention.ms or .bytes), or wholly below the remote end
// and past local retention (tiered topics), or wholly below the log start.
// Nothing within total retention is deleted before it is uploaded.
// Invariant: the remote log start moves only forward, only over whole
// objects (or to where DeleteRecords put it), and never past the remote end.
// Invariant: an object is deleted only once it is wholly below a clean
// target that was set at least Grace earlier and that is at most the log
// start, and never while a pin lies inside or below it.

import (
	"time"

	"github.com/sluice-mq/sluice/wal"
)

// Unlimited is the value of a retention setting that keeps everything.
const Unlimited = -1

// Policy is a topic's retention settings, in Kafka's units and meanings.
type Policy struct {
	// Tiered: closed data moves to object storage (remote.storage.enable).
	Tiered bool
	// RetentionMs and RetentionBytes bound the whole log (retention.ms,
	// retention.bytes); Unlimited keeps everything, 0 keeps nothing closed.
	RetentionMs    int64
	RetentionBytes int64
	// LocalRetentionMs and LocalRetentionBytes bound what a tiered topic
	// keeps on local disk once uploaded (local.retention.ms/.bytes), already
	// resolved: -2 ("follow the total") is replaced by the total setting.
	LocalRetentionMs    int64
	LocalRetentionBytes int64
	// Grace is how long an object stays after the log start passed it, for
	// readers still streaming it.
	Grace time.Duration
}

// Resolve replaces the -2 ("same as the total") of the local settings.
func (p Policy) Resolve() Policy {
	if p.LocalRetentionMs == -2 {
		p.LocalRetentionMs = p.RetentionMs
	}
	if p.LocalRetentionBytes == -2 {
		p.LocalRetentionBytes = p.RetentionBytes
	}
	return p
}

// expired reports whether data with max timestamp maxTs is past a retention
// of ms milliseconds at now.
func expired(ms, maxTs int64, now time.Time) bool {
	return ms != Unlimited && maxTs < now.UnixMilli()-ms
}

// LocalInput is what LocalDeleteBelow decides on.
type LocalInput struct {
	Segments []wal.SegmentInfo // the local log's, in offset order, last one active
	HW       wal.Offset        // the partition's high watermark
	// LogStart is the partition's log start as clients see it (the remote
	// one for a tiered topic with objects, else the local one).
	LogStart  wal.Offset
	RemoteEnd wal.Offset   // offsets below it are in committed objects
	Pins      []wal.Offset // offsets readers are at; their segments stay
	Now       time.Time
}

// LocalDeleteBelow returns the offset below which the local log may delete
// whole segments (wal.Log.DeleteBelow); 0 deletes nothing.
func LocalDeleteBelow(p Policy, in LocalInput) wal.Offset {
	p = p.Resolve()
	limit := in.HW
	for _, pin := range in.Pins {
		limit = min(limit, pin)
	}
	sealed := len(in.Segments) - 1
	if sealed <= 0 {
		return 0
	}
	var total int64
	for _, s := range in.Segments {
		total += s.Size
	}
	n := 0
	for ; n < sealed; n++ {
		s := in.Segments[n]
		if s.Next > limit {
			break
		}
		below := s.Next <= in.LogStart
		// Past total retention, data goes whether uploaded or not: no
		// reader may see it any more, and uploading it would be waste.
		gone := expired(p.RetentionMs, s.MaxTimestamp, in.Now) || (p.RetentionBytes != Unlimited && total > p.RetentionBytes)
		// Past local retention, a tiered topic's data goes once uploaded.
		local := p.Tiered && s.Next <= in.RemoteEnd &&
			(expired(p.LocalRetentionMs, s.MaxTimestamp, in.Now) || (p.LocalRetentionBytes != Unlimited && total > p.LocalRetentionBytes))
		if !below && !gone && !local {
			break
		}
		total -= s.Size
	}
	if n == 0 {
		return 0
	}
	return in.Segments[n-1].Next
}

// RemoteObject is what the machine knows of one committed object.
type RemoteObject struct {
	Key   string
	Base  wal.Offset
	Next  wal.Offset
	Size  int64
	MaxTs int64
}

// StartInput is what RemoteLogStart decides on.
type StartInput struct {
	Objects   []RemoteObject // committed objects at or above the current log start, in order
	LogStart  wal.Offset
	RemoteEnd wal.Offset
	// LocalBytesAbove is the local log's size above the remote end, which
	// counts toward retention.bytes with the objects.
	LocalBytesAbove int64
	Now             time.Time
}

// RemoteLogStart returns the tiered log start after total retention: it
// moves past every leading object older than retention.ms and past the
// oldest objects while the partition is larger than retention.bytes. Only
// uploaded data is ever passed: data not yet in an object waits for its
// upload.
func RemoteLogStart(p Policy, in StartInput) wal.Offset {
	total := in.LocalBytesAbove
	for _, o := range in.Objects {
		total += o.Size
	}
	start := in.LogStart
	for _, o := range in.Objects {
		if o.Next <= start {
			total -= o.Size
			continue
		}
		if !expired(p.RetentionMs, o.MaxTs, in.Now) && (p.RetentionBytes == Unlimited || total <= p.RetentionBytes) {
			break
		}
		start = o.Next
		total -= o.Size
	}
	return min(start, in.RemoteEnd)
}

// CleanState is the head's record of the remote clean-up in progress.
type CleanState struct {
	Clean    wal.Offset // objects wholly below it are gone
	Pending  wal.Offset // clean target; 0 when none
	DueMs    int64      // when objects below Pending may go (ms since the epoch)
	LogStart wal.Offset
}

// CleanStep is the next step of the remote clean-up.
type CleanStep struct {
	// SetPending starts a grace period: the head records Pending and DueMs.
	SetPending bool
	Pending    wal.Offset
	DueMs      int64
	// Delete lists objects to delete now (deleting a missing one is
	// success), after which the head's clean offset becomes CleanTo and the
	// pending target is cleared.
	Delete  []RemoteObject
	CleanTo wal.Offset
}

// NextClean decides the clean-up step: nothing, start a grace period up to
// the log start (capped below the lowest pin), or, once the grace has run,
// delete the objects wholly below the pending target. objects are those
// known below the target, in order.
func NextClean(p Policy, st CleanState, objects []RemoteObject, pins []wal.Offset, now time.Time) (CleanStep, bool) {
	if st.Pending > st.Clean {
		if now.UnixMilli() < st.DueMs {
			return CleanStep{}, false
		}
		target := st.Pending
		for _, pin := range pins {
			target = min(target, pin)
		}
		var del []RemoteObject
		for _, o := range objects {
			if o.Next <= target && o.Next > st.Clean {
				del = append(del, o)
			}
		}
		if target <= st.Clean {
			return CleanStep{}, false
		}
		return CleanStep{Delete: del, CleanTo: target}, true
	}
	if st.LogStart > st.Clean {
		return CleanStep{SetPending: true, Pending: st.LogStart, DueMs: now.Add(p.Grace).UnixMilli()}, true
	}
	return CleanStep{}, false
}
