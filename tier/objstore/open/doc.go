// Package open turns an object-store URL into an objstore.Store, choosing the
// implementation by the URL's scheme:
//
//	file:///abs/path                       file.New: a directory, created if missing
//	s3://bucket/prefix?endpoint=URL&region=NAME  s3.New (see package s3)
//	mem://                                 mem.New: a new empty store each time
//
// It sits above the implementations so that package objstore, which they all
// import, needs none of them.
package open
