package quota

// This file owns Table: the broker's Source, an atomically swapped
// snapshot of every tenant's limits and scheduling attributes, fed by the
// broker's follower of etcd (broker/quotas.go) or by Replace in tests.
//
// Invariant: readers (Limits, Scheduling) load one published snapshot and
// take no lock; a snapshot and everything it holds is never changed after
// Replace publishes it.
// Invariant: a tenant absent from the snapshot is unlimited, of weight 1
// and class standard.

import (
	"maps"
	"sync/atomic"
)

// Priority classes of a tenant (meta's PriorityStandard and PriorityLow):
// the disk-watermark ladder's second step lowers the bursts of low tenants
// first.
const (
	ClassStandard = "standard"
	ClassLow      = "low"
)

// DefaultWeight is a tenant's share in fair scheduling when none is set.
const DefaultWeight = 1.0

// Entry is one tenant's row of the table.
type Entry struct {
	Limits Limits  // an absent key is unlimited; never modified once published
	Weight float64 // > 0
	Class  string  // ClassStandard or ClassLow
}

// Table is a Source of every tenant's current limits. Safe for concurrent
// use; reads are a pointer load and a map lookup.
type Table struct {
	snap atomic.Pointer[tableSnapshot]
}

type tableSnapshot struct {
	revision int64
	tenants  map[string]Entry
}

var _ Source = (*Table)(nil)

// NewTable returns a table in which every tenant is unlimited.
func NewTable() *Table {
	t := &Table{}
	t.snap.Store(&tableSnapshot{tenants: map[string]Entry{}})
	return t
}

// Replace publishes entries (by tenant) as of revision. The table keeps
// entries: the caller must not change it afterwards.
func (t *Table) Replace(revision int64, entries map[string]Entry) {
	if entries == nil {
		entries = map[string]Entry{}
	}
	t.snap.Store(&tableSnapshot{revision: revision, tenants: entries})
}

// Limits returns the tenant's limits (nil: unlimited). The map is shared:
// callers must not modify it.
func (t *Table) Limits(tenant string) Limits {
	return t.snap.Load().tenants[tenant].Limits
}

// Scheduling returns the tenant's weight in fair scheduling and its
// priority class.
func (t *Table) Scheduling(tenant string) (weight float64, class string) {
	e, ok := t.snap.Load().tenants[tenant]
	if !ok || e.Weight <= 0 {
		return DefaultWeight, ClassStandard
	}
	if e.Class == "" {
		return e.Weight, ClassStandard
	}
	return e.Weight, e.Class
}

// Revision is the etcd revision of the snapshot in force (0: none read).
func (t *Table) Revision() int64 { return t.snap.Load().revision }

// Tenants returns a copy of every tenant's entry, for display.
func (t *Table) Tenants() map[string]Entry { return maps.Clone(t.snap.Load().tenants) }
