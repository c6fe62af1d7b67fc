// Package mem is an objstore.Store in memory: a map from key to an immutable
// copy of the object, for tests and for the mem:// URL. Every store starts
// empty; there is no shared namespace between two stores.
package mem
