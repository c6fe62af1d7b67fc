// Package tier moves a partition's committed data to object storage and
// serves it back, and owns every deletion of data (DESIGN.md §3, §5).
//
// The pieces:
//   - retention.go: the retention state machine's pure core. It decides, from
//     a partition's local segments, its remote head, its settings, the
//     readers' pins and an injected time, what may be deleted locally, where
//     the log start moves, and which objects go after the grace period.
//
// Watermarks of a tiered partition, all only moving forward:
//
//	clean ≤ pending clean ≤ log start ≤ remote end ≤ high watermark ≤ log end
//	   objects wholly below clean are deleted
//	   objects wholly below pending clean go once its grace period has run
//	   reads below the log start fail with OFFSET_OUT_OF_RANGE
//	   offsets below the remote end are in committed objects
//	   local segments wholly below the remote end may go after local retention
package tier
