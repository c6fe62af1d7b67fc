// Package storetest is the conformance suite of objstore.Store: Run checks one
// implementation against the contract in objstore's package doc (whole-object
// Put, ranged Get, Head, List order and prefixes, Delete, ErrNotFound, key
// validation, atomic overwrite under concurrent readers, a 9 MiB object,
// cancelled contexts). Every implementation's tests call it, and so may any
// package that wraps a Store.
package storetest
