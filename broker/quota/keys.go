package quota

// This file owns the quota keys: their names, kinds, units and the
// validation of values.
//
// Invariant: a Limits value holds only known keys, each with a finite value
// that is positive (counts and rates may be 0 only where 0 means "none at
// all", see Key.ZeroAllowed); Validate is the one place that decides.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Kind is how a key is enforced.
type Kind int

const (
	// Rate keys are per second, measured over a window and throttled.
	Rate Kind = iota + 1
	// Count keys bound how many of something a tenant has at once.
	Count
	// Storage keys bound retained bytes.
	Storage
)

func (k Kind) String() string {
	switch k {
	case Rate:
		return "rate"
	case Count:
		return "count"
	case Storage:
		return "storage"
	}
	return "unknown"
}

// The quota keys. Kafka's names where Kafka has one.
const (
	ProducerByteRate       = "producer_byte_rate"       // bytes/s of produce requests
	ConsumerByteRate       = "consumer_byte_rate"       // bytes/s of fetch responses
	ProducerRecordRate     = "producer_record_rate"     // records/s produced
	RequestPercentage      = "request_percentage"       // % of one handler thread's time, per second
	ConnectionCreationRate = "connection_creation_rate" // new connections/s
	ControllerMutationRate = "controller_mutation_rate" // partitions created or deleted /s
	Partitions             = "partitions"               // partitions of the tenant's topics
	Topics                 = "topics"                   // topics of the tenant
	Groups                 = "groups"                   // consumer groups of the tenant
	Connections            = "connections"              // open connections of the tenant
	InflightRequests       = "inflight_requests"        // requests read but not answered, per connection
	StorageBytes           = "storage_bytes"            // retained bytes: local + remote + large objects
	ObjectUploadByteRate   = "object_upload_byte_rate"  // large-object upload bytes/s
	ObjectDownloads        = "object_downloads"         // concurrent large-object downloads
	ObjectStorageBytes     = "object_storage_bytes"     // stored large-object bytes
)

// Key describes one quota key.
type Key struct {
	Name  string
	Kind  Kind
	Unit  string // for people: "bytes/s", "records/s", "%", ...
	Kafka bool   // Kafka has a key of this name
	// Integer keys take whole numbers only.
	Integer bool
	// ZeroAllowed: 0 is a meaningful limit (none at all), not a typo.
	ZeroAllowed bool
	Help        string
}

var keys = []Key{
	{ProducerByteRate, Rate, "bytes/s", true, false, false, "bytes of produce requests accepted per second, cluster-wide"},
	{ConsumerByteRate, Rate, "bytes/s", true, false, false, "bytes of fetch responses served per second, cluster-wide"},
	{ProducerRecordRate, Rate, "records/s", false, false, false, "records produced per second, cluster-wide"},
	{RequestPercentage, Rate, "%", true, false, false, "handler time per second, in percent of one handler thread, per broker"},
	{ConnectionCreationRate, Rate, "connections/s", true, false, false, "new connections per second, cluster-wide"},
	{ControllerMutationRate, Rate, "partitions/s", true, false, false, "partitions created or deleted per second, cluster-wide"},
	{Partitions, Count, "partitions", false, true, true, "partitions of the tenant's topics"},
	{Topics, Count, "topics", false, true, true, "topics of the tenant"},
	{Groups, Count, "groups", false, true, true, "consumer groups of the tenant"},
	{Connections, Count, "connections", false, true, true, "open connections of the tenant, cluster-wide"},
	{InflightRequests, Count, "requests", false, true, false, "requests read but not yet answered, per connection"},
	{StorageBytes, Storage, "bytes", false, true, true, "bytes retained: local, remote and large objects"},
	{ObjectUploadByteRate, Rate, "bytes/s", false, false, false, "large-object upload bytes per second, cluster-wide"},
	{ObjectDownloads, Count, "downloads", false, true, true, "large-object downloads at once"},
	{ObjectStorageBytes, Storage, "bytes", false, true, true, "bytes of stored large objects"},
}

// Keys returns every quota key, sorted by name.
func Keys() []Key {
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup returns the key named name.
func Lookup(name string) (Key, bool) {
	for _, k := range keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// Check reports whether v is a valid value of the key named name.
func Check(name string, v float64) error {
	k, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("unknown quota key %q (known: %s)", name, strings.Join(names(), ", "))
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("quota %s: %v is not a finite number", name, v)
	case v < 0:
		return fmt.Errorf("quota %s: %v is negative", name, v)
	case v == 0 && !k.ZeroAllowed:
		return fmt.Errorf("quota %s: 0 would refuse everything; remove the key for no limit", name)
	case k.Integer && v != math.Trunc(v):
		return fmt.Errorf("quota %s: %v is not a whole number", name, v)
	case k.Integer && v > 1<<53:
		return fmt.Errorf("quota %s: %v is too large", name, v)
	case name == RequestPercentage && v > 100*1024:
		return fmt.Errorf("quota %s: %v is more than any broker has", name, v)
	}
	return nil
}

// Parse reads a value given as text ("10485760", "1e7", "50.5").
func Parse(name, text string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil {
		return 0, fmt.Errorf("quota %s: %q is not a number", name, text)
	}
	if err := Check(name, v); err != nil {
		return 0, err
	}
	return v, nil
}

func names() []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Name
	}
	slices.Sort(out)
	return out
}

// Limits are one tenant's quotas by key; an absent key is unlimited.
type Limits map[string]float64

// Validate checks every key and value.
func (l Limits) Validate() error {
	var errs []error
	for _, n := range slices.Sorted(mapKeys(l)) {
		if err := Check(n, l[n]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Get returns the limit of key and whether there is one.
func (l Limits) Get(key string) (float64, bool) {
	v, ok := l[key]
	return v, ok
}

func mapKeys(l Limits) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range l {
			if !yield(k) {
				return
			}
		}
	}
}

// Source answers a tenant's current limits (nil or empty: unlimited). The
// broker's is fed by a watch of etcd, so a change applies within a second;
// it is called on request paths and must be safe for concurrent use and
// cheap (no I/O).
type Source interface {
	Limits(tenant string) Limits
}

// Static is a Source of fixed limits, by tenant: for tests and for a broker
// without a metadata store.
type Static map[string]Limits

// Limits returns the tenant's limits.
func (s Static) Limits(tenant string) Limits { return s[tenant] }
