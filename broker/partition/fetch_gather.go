package partition

// This file owns the leader's wait for the answers of one replica Fetch
// request: each partition's fetch is stepped into its core, the request
// waits for the first answer (or its MaxWait), and every fetch a core still
// holds at that moment is answered by the core then (ExpireReplicaFetch).
//
// Invariant: a held fetch is never left held when its request is answered.
// An answer the core gave later, at its own park deadline, would reach no
// one, and the follower's next fetch would be held again with the same high
// watermark: a follower whose fetch was not held when the high watermark
// moved would never learn it while no record came (the chaos run
// leader-kill, seed 3, ended with followers a few records behind).

import (
	"context"
	"reflect"
	"time"

	"github.com/sluice-mq/sluice/broker/replica"
)

// ReplicaFetchWait is one follower fetch stepped into its partition's core
// (StartReplicaFetch) and, once gathered, the core's answer.
type ReplicaFetchWait struct {
	P      *Partition
	from   replica.NodeID
	seq    uint64
	answer <-chan FetchAnswer
	Got    *FetchAnswer // after GatherReplicaFetches; nil: the core did not judge the fetch
}

// StartReplicaFetch steps the follower's fetch m into p's core.
func StartReplicaFetch(p *Partition, m replica.Message) *ReplicaFetchWait {
	return &ReplicaFetchWait{P: p, from: m.From, seq: m.Seq, answer: p.ReplicaFetch(m)}
}

// take takes w's answer if it is there.
func (w *ReplicaFetchWait) take() bool {
	select {
	case a := <-w.answer:
		w.Got = &a
		return true
	default:
		return false
	}
}

// GatherReplicaFetches waits until one of ws has its answer, wait passes or
// ctx ends, then has the cores answer the fetches they still hold and takes
// every answer there is.
func GatherReplicaFetches(ctx context.Context, wait time.Duration, ws []*ReplicaFetchWait) {
	var waiting []*ReplicaFetchWait
	got := 0
	for _, w := range ws {
		if w.take() {
			got++
		} else {
			waiting = append(waiting, w)
		}
	}
	if got == 0 && len(waiting) > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		cases := make([]reflect.SelectCase, 0, len(waiting)+2)
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
		for _, w := range waiting {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.answer)})
		}
		if chosen, v, ok := reflect.Select(cases); chosen >= 2 && ok {
			a := v.Interface().(FetchAnswer)
			waiting[chosen-2].Got = &a
		}
	}
	// Every core is asked first and waited for after, so they look at once.
	looked := make([]<-chan struct{}, len(waiting))
	for i, w := range waiting {
		if w.Got == nil {
			looked[i] = w.P.ExpireReplicaFetch(w.from, w.seq)
		}
	}
	for i, w := range waiting {
		if looked[i] != nil {
			<-looked[i]
			w.take()
		}
	}
}
