// Package hotkeys measures what one partition takes in: its ingress bytes
// and records per second and its hottest keys by records per second, in
// bounded memory, for `sluicectl top`, GET /v1/topics/{t}/hot-keys and the
// sluice_partition_* ingress metrics.
//
// Sketch is the pure core: a space-saving top-k table (Metwally, Agrawal
// and El Abbadi, 2005) of K counters over exponentially decayed weights,
// with the clock passed in on every call. Meter wraps one Sketch per
// partition with a lock and reads keys out of record batches.
//
// # Decay
//
// A record arriving at time t weighs exp((t-L)/Tau) against a landmark L
// ("forward decay", Cormode et al., 2009): every count, exact or
// estimated, then decays by the same factor between two moments, so the
// space-saving table keeps its guarantees over the decayed weights, and an
// update costs one multiplication per batch, not one per counter. At time
// now a key's decayed count is sum(exp(-(now-t_i)/Tau)) over its records;
// for a key arriving at a steady r records/s it tends to r*Tau, so its rate
// is read as count/Tau. A rate therefore answers to a change within about
// Tau (63% after Tau, 95% after 3*Tau). In the sketch's first few Tau
// the count has not filled yet (r*Tau*(1-exp(-age/Tau))), so a report
// divides by that share and a new partition's rates read right at once. The landmark moves forward (and
// every count is scaled down) once the exponent passes rescaleAt, so
// weights stay far from float64 overflow.
//
// # Error bound (space-saving)
//
// With K counters and a decayed total of N records, each counter's count
// over-estimates its key's true decayed count by at most its err field,
// and err <= N/K. So a reported rate r with error e means the key's true
// rate is in [r-e, r], and every key whose true rate exceeds
// (records/s)/K is in the table. With K = 16, any key taking more than
// 1/16 of a partition's records is always listed; the rates of keys near
// or below that share are upper bounds only.
//
// # Cost and sampling
//
// An uncompressed batch has its keys walked in place (no allocation; a
// hash and at most 2*K comparisons per keyed record). A compressed batch
// is decompressed only one time in SampleEvery (per partition), and the
// keys of that batch stand for all the records of the compressed batches
// since the last sample (each weighs records-since-sample/records-in-it),
// which is unbiased while the key mix is stable. At most two batches are
// decompressed for sampling at once in the process; a batch due for a
// sample that finds both slots busy is skipped and the next one is
// sampled, so sampling never makes a produce wait. Records without a key
// count toward the totals but never enter the table.
//
// # Invariants
//
// Invariant: a Sketch holds at most K counters and a copy of at most
// KeyPrefix bytes of each key; a Meter holds one Sketch. Memory per
// partition is constant whatever the traffic.
// Invariant: a key's reported rate never under-states its true decayed
// rate, and over-states it by at most the error reported with it.
// Invariant: Meter's state is guarded by its mutex; Sketch is not safe for
// concurrent use.
package hotkeys
