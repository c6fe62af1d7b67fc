package console

// This file owns the tiered-storage pages: a partition's remote log (its
// head in etcd: log start, clean offset, pending clean; its committed
// objects, read through level-0 and higher manifests as tierctl ls reads
// them; its manifests and upload intents) with the retention plan (which
// objects lie below the log start and wait for cleaning, which are past
// the topic's retention.ms), and, for super users, the bucket diffed with
// every head (orphans and missing keys, tier.Diff as tierctl diff runs it,
// read-only: nothing is deleted here).
//
// Invariant: the caller is authorised on the topic first, by the same
// in-process GET /v1/topics/{topic} the topic page makes (DESCRIBE);
// only then is the node read. Nothing here writes to etcd or the store.

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
)

// tierPage is a partition's remote log as the page shows it.
type tierPage struct {
	Topic     string
	Partition int32
	Figures   *partitionAnswer
	Head      meta.RemoteHead
	Objects   []tierObject
	Bytes     int64
	Retention struct {
		RetentionMs     string
		RetentionBytes  string
		LocalMs         string
		LocalBytes      string
		BelowStart      int   // objects wholly below the log start: cleaned next
		BelowStartBytes int64 // their bytes
		Expired         int   // objects past retention.ms, above the log start
		PendingAt       int64 // when the pending clean may delete (ms), 0 none
	}
}

type tierObject struct {
	meta.RemoteObject
	State string // "live", "below log start", "past retention.ms"
}

func (q *request) tier(topic, partStr string) {
	title := "Tiered storage of " + topic + "/" + partStr
	part, err := strconv.ParseInt(partStr, 10, 32)
	if err != nil || part < 0 {
		q.render(http.StatusBadRequest, "error", page{Title: title, Error: "partition " + strconv.Quote(partStr) + " is not a partition number"})
		return
	}
	var t topicAnswer
	if err := q.api.get(q.ctx(), "/v1/topics/"+escape(topic), nil, &t); err != nil {
		q.fail(title, err)
		return
	}
	p := page{Title: title, Nav: "topics"}
	tp := tierPage{Topic: topic, Partition: int32(part)}
	for i := range t.Partitions {
		if t.Partitions[i].Partition == tp.Partition {
			tp.Figures = &t.Partitions[i]
		}
	}
	if tp.Figures == nil {
		q.render(http.StatusNotFound, "error", page{Title: title, Error: "the topic has no partition " + partStr})
		return
	}
	tp.Retention.RetentionMs, tp.Retention.RetentionBytes = t.config("retention.ms"), t.config("retention.bytes")
	tp.Retention.LocalMs, tp.Retention.LocalBytes = t.config("local.retention.ms"), t.config("local.retention.bytes")
	n := q.c.cfg.Node
	nt := n.LookupTopic(q.internal(topic))
	switch {
	case !t.Tiered:
		p.Notes = append(p.Notes, "This topic is not tiered (remote.storage.enable is false): it has no remote log.")
	case nt == nil:
		p.Notes = append(p.Notes, "This broker does not know the topic yet.")
	case n.Objects == nil:
		p.Notes = append(p.Notes, "This broker has no object store.")
	default:
		head, err := n.Store.RemoteHead(q.ctx(), nt.Meta.ID, tp.Partition)
		if err != nil {
			p.Error = "the remote head: " + err.Error()
			break
		}
		tp.Head = head
		objs, err := tier.ListObjects(q.ctx(), n.Objects, head)
		if err != nil {
			p.Error = "the objects: " + err.Error()
		}
		retMs, _ := strconv.ParseInt(tp.Retention.RetentionMs, 10, 64)
		now := q.c.cfg.Now().UnixMilli()
		for _, o := range objs {
			to := tierObject{RemoteObject: o, State: "live"}
			switch {
			case o.Next <= head.LogStart:
				to.State = "below log start: cleaned next"
				tp.Retention.BelowStart++
				tp.Retention.BelowStartBytes += o.Size
			case retMs > 0 && o.MaxTs > 0 && now-o.MaxTs > retMs:
				to.State = "past retention.ms"
				tp.Retention.Expired++
			}
			tp.Bytes += o.Size
			tp.Objects = append(tp.Objects, to)
		}
		if head.PendingClean > head.Clean {
			tp.Retention.PendingAt = head.PendingCleanMs
		}
	}
	p.Content = tp
	q.render(http.StatusOK, "tier", p)
}

// orphansPage is the bucket's diff with every head.
type orphansPage struct {
	Report tier.DiffReport
	Grace  time.Duration
}

func (q *request) orphans() {
	title := "Orphaned objects"
	if !q.id.IsSuper() && !q.admin {
		q.render(http.StatusForbidden, "error", page{Title: title, Nav: "topics",
			Error: "Only a super user may list the whole bucket: it holds every tenant's objects."})
		return
	}
	n := q.c.cfg.Node
	if n == nil || n.Objects == nil {
		q.render(http.StatusOK, "error", page{Title: title, Nav: "topics", Error: "This broker has no object store."})
		return
	}
	rep, err := tier.Diff(q.ctx(), n.Objects, n.Store.RemoteHeads, tier.DiffConfig{Grace: q.c.cfg.TierGrace, Now: q.c.cfg.Now()})
	if err != nil {
		q.fail(title, err)
		return
	}
	q.render(http.StatusOK, "orphans", page{Title: title, Nav: "topics", Content: orphansPage{Report: rep, Grace: q.c.cfg.TierGrace}})
}
