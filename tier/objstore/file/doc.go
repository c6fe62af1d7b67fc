// Package file is an objstore.Store in a directory of a local file system,
// for single-broker setups (sluiced's default ./data/objects) and tests.
//
// # Layout
//
// The object with key "a/b/c" is the file <root>/a/b/c: each key segment but
// the last is a directory. So one key cannot be a segment-prefix of another
// ("a" and "a/b" cannot both exist); Put of such a key fails.
//
//	<root>/
//	  .tmp/            Put's temporary files; New removes those older than an hour (a crash's
//	                   leftovers: several processes may share the directory), never listed
//	  <seg>/<seg>/...  objects, whole files, replaced only by rename
//
// Keys whose first segment is ".tmp" are refused (objstore.ErrInvalidKey).
//
// # Durability
//
// Put writes a temporary file in .tmp, fsyncs it, renames it over the key's
// path and fsyncs that directory; a directory it creates is fsynced in its
// parent first. After a crash a key holds its old object or its new one,
// never part of one. Delete removes the file, fsyncs its directory, then
// removes the directories it leaves empty.
//
// # Concurrency
//
// Store.mu orders Put against Delete's removal of empty directories: Put and
// the removal of a file hold it shared, the directory removal exclusively, so
// a Put never finds its directory gone between creating it and the rename.
// One process per directory: two processes sharing one could race that way.
package file
