// Package s3 is an objstore.Store on Amazon S3 or any S3-compatible service
// (Versity's gateway in our tests, MinIO, Ceph RGW), through aws-sdk-go-v2.
//
// # Configuration
//
// The URL s3://bucket/prefix?endpoint=http://host:port&region=us-east-1
// (ParseURL) names the bucket, a key prefix (objects are stored under
// "prefix/"+key, and listed without it), an optional endpoint for a service
// other than AWS, and an optional region (else the AWS environment's, else
// us-east-1). Addressing is path-style (http://host/bucket/key), which every
// S3-compatible service accepts. Credentials come from the standard AWS chain
// (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, shared files, web identity,
// instance metadata) unless objstore.Options carries a static key pair.
//
// # Failures
//
// Every call runs under Options.Timeout on top of the caller's context; a List
// gets a fresh one per page. Inside it the SDK's standard retryer retries
// transient failures (5xx, throttling, connection errors) with exponential
// backoff and jitter, up to Options.MaxAttempts attempts, and Get also
// retries a body cut off mid-read. NoSuchKey (and a 404 to HEAD) becomes
// objstore.ErrNotFound; NoSuchBucket does not, since a missing bucket is a
// configuration error, not a missing object. A HEAD's 404 has no body to
// tell the two apart, so the first one is checked with HeadBucket.
package s3
