package main

// drain.go owns what `sluicectl broker drain N` reports: which partitions
// broker N led and which groups it coordinated before the drain mark was
// set (GET /v1/topics/{t}, GET /v1/groups), and where each one went once
// the drain is done (the partitions' leaders again; for a group, GET
// /v1/groups/{g}, which the receiving broker routes to the group's
// coordinator in its placement). The group check is what lets the command
// say that N coordinates no group: it polls until every group N held is
// served elsewhere, instead of trusting a fixed wait.
//
// Invariant: a move is printed only as observed by the server; a group
// that is still on N when the wait ends fails the command.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// movedPartition is one leadership a drain moved; To is -1 if the
// partition has no leader now.
type movedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int32  `json:"from"`
	To        int32  `json:"to"`
}

// movedGroup is one group a drain moved; To is -1 if the group no longer
// exists (an empty group with no committed offset is not kept).
type movedGroup struct {
	Group string `json:"group"`
	From  int32  `json:"from"`
	To    int32  `json:"to"`
}

// heldBy is what one broker leads and coordinates.
type heldBy struct {
	partitions []movedPartition // To unset
	groups     []string
}

type topicLeaders struct {
	Partitions []struct {
		Partition int32 `json:"partition"`
		Leader    int32 `json:"leader"`
	} `json:"partitions"`
}

// leadersOf is each partition's leader of topic, -1 for none.
func (e *env) leadersOf(ctx context.Context, topic string) (map[int32]int32, error) {
	var d topicLeaders
	if err := e.call(ctx, "GET", "/v1/topics/"+esc(topic), nil, nil, &d); err != nil {
		return nil, err
	}
	out := make(map[int32]int32, len(d.Partitions))
	for _, p := range d.Partitions {
		out[p.Partition] = p.Leader
	}
	return out, nil
}

// held lists the partitions broker id leads and the groups it coordinates.
func (e *env) held(ctx context.Context, id int32) (heldBy, error) {
	var h heldBy
	var topics struct {
		Topics []struct {
			Name string `json:"name"`
		} `json:"topics"`
	}
	if err := e.call(ctx, "GET", "/v1/topics", nil, nil, &topics); err != nil {
		return h, err
	}
	for _, t := range topics.Topics {
		leaders, err := e.leadersOf(ctx, t.Name)
		if notFound(err) {
			continue // deleted since the listing
		}
		if err != nil {
			return h, err
		}
		for p, l := range leaders {
			if l == id {
				h.partitions = append(h.partitions, movedPartition{Topic: t.Name, Partition: p, From: id})
			}
		}
	}
	slices.SortFunc(h.partitions, func(a, b movedPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	var groups struct {
		Groups []struct {
			Group       string `json:"group"`
			Coordinator int32  `json:"coordinator"`
		} `json:"groups"`
	}
	if err := e.call(ctx, "GET", "/v1/groups", nil, nil, &groups); err != nil {
		return h, err
	}
	for _, g := range groups.Groups {
		if g.Coordinator == id {
			h.groups = append(h.groups, g.Group)
		}
	}
	return h, nil
}

// whereNow finds where each leadership and group in h went, polling until
// no group is still coordinated by h's broker or ctx ends.
func (e *env) whereNow(ctx context.Context, id int32, h heldBy) ([]movedPartition, []movedGroup, error) {
	parts := slices.Clone(h.partitions)
	byTopic := map[string]map[int32]int32{}
	for i, p := range parts {
		if byTopic[p.Topic] == nil {
			leaders, err := e.leadersOf(ctx, p.Topic)
			if err != nil && !notFound(err) { // a deleted topic: its partitions have no leader
				return nil, nil, err
			}
			byTopic[p.Topic] = leaders
		}
		parts[i].To = -1
		if l, ok := byTopic[p.Topic][p.Partition]; ok {
			parts[i].To = l
		}
	}
	groups := make([]movedGroup, 0, len(h.groups))
	for _, g := range h.groups {
		for {
			var d struct {
				Coordinator int32 `json:"coordinator"`
			}
			err := e.call(ctx, "GET", "/v1/groups/"+esc(g), nil, nil, &d)
			switch {
			case err == nil && d.Coordinator != id:
				groups = append(groups, movedGroup{Group: g, From: id, To: d.Coordinator})
			case notFound(err):
				groups = append(groups, movedGroup{Group: g, From: id, To: -1})
			default:
				// Still on the drained broker, or being taken over
				// (a retriable 503): ask again.
				select {
				case <-ctx.Done():
					why := "it still coordinates it"
					if err != nil {
						why = err.Error()
					}
					return nil, nil, fmt.Errorf("group %s did not move off broker %d: %s", g, id, why)
				case <-time.After(500 * time.Millisecond):
				}
				continue
			}
			break
		}
	}
	return parts, groups, nil
}

// notFound reports whether err is the server's 404.
func notFound(err error) bool {
	var se *serverError
	return errors.As(err, &se) && se.Status == http.StatusNotFound
}

// drained reports a finished drain and what it moved.
func (e *env) drained(id int32, parts []movedPartition, groups []movedGroup) error {
	if e.json {
		return e.writeJSON(map[string]any{"broker": id, "draining": true, "leaders": 0,
			"moved": map[string]any{"partitions": parts, "groups": groups}})
	}
	fmt.Fprintf(e.stdout, "broker %d drained: it leads no partition and coordinates no group; stop it now\n", id)
	fmt.Fprintf(e.stdout, "moved %s and %s off it\n", plural(len(parts), "partition leadership"), plural(len(groups), "group"))
	to := func(n int32, none string) string {
		if n < 0 {
			return none
		}
		return fmt.Sprint(n)
	}
	for _, p := range parts {
		fmt.Fprintf(e.stdout, "  %s-%d: %d -> %s\n", p.Topic, p.Partition, p.From, to(p.To, "no leader"))
	}
	for _, g := range groups {
		fmt.Fprintf(e.stdout, "  group %s: %d -> %s\n", g.Group, g.From, to(g.To, "gone (no state kept)"))
	}
	return nil
}

// plural is "1 group", "2 groups".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
