// Package fair shares a broker's contended resources between tenants by
// deficit round robin (DRR): handler time, fetch bytes read from the local
// log, and object-storage GETs of backfill reads. It is a pure core: the
// broker names the lanes, charges each grant its cost afterwards, and reads
// the weights from the tenants' scheduling attributes.
//
// A Lane has a fixed number of slots (concurrent grants). While a slot is
// free and nobody waits, Acquire grants at once: fairness costs nothing on
// an idle broker. When every slot is taken, each tenant waits in its own
// FIFO, and a freed slot goes to the tenants in round-robin order, each
// visit adding quantum × weight to the tenant's deficit; a tenant is served
// when its deficit is positive, and each grant's cost (bytes, or
// nanoseconds of handler time) is subtracted when it is done. Costs are
// known only afterwards, so a deficit may go negative (a debt): the tenant
// then sits out rounds until its quanta have repaid it. Over any busy
// period each backlogged tenant gets a share of the lane's cost in
// proportion to its weight, to within one maximal grant cost plus one
// quantum per tenant (DRR's bound, with the debt carried instead of the
// packet held back).
//
//	lane       slots            cost            what waits in it
//	handler    GOMAXPROCS × 2   handler ns      produce, metadata, one fetch pass
//	backfill   S3 GET limit     object bytes    GETs of a remote read's missing chunks
//
// A read-cache hit takes no backfill slot, so a tenant replaying 30 days
// from object storage queues behind its own GETs, never in front of another
// tenant's cache hits or tail reads. The backfill lane also bounds how many
// GETs one tenant may have in flight (PerTenant).
package fair
