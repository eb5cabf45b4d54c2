// Package atomicbucket is the cell every limiter of this module is built on:
// a GCRA bucket whose whole state is one atomic word, the theoretical arrival
// time, updated by one CompareAndSwap loop. The parameters live outside it,
// so one gcra.Params serves any number of buckets and a Bucket costs 8
// bytes; the zero Bucket is a full bucket.
//
// Use it to build a limiter of your own (a bucket per connection, per
// struct, in an array). The limiters themselves, single-key and keyed, for
// GCRA and every other algorithm, are in package atomiclimit.
//
// A denied request writes nothing: a flood of denials only loads the word
// and leaves its cache line shared. A stale or backward now can only make a
// decision stricter: the stored time never moves back.
package atomicbucket

import "github.com/atomiclimit/atomiclimit/internal/core"

type (
	// A Bucket is a GCRA rate limiter whose whole state is one atomic word.
	// It is safe for concurrent use; its methods never block or allocate. A
	// Bucket must not be copied after first use. In Go memory-model terms,
	// an admission (a successful CompareAndSwap) synchronizes before every
	// later call that observes the state it stored.
	Bucket = core.Bucket
	// A PaddedBucket is a Bucket alone on a 64-byte cache line, for one
	// bucket hit from many cores.
	PaddedBucket = core.PaddedBucket
)
