package door

// DefaultMaxKeyLen is the longest key, in bytes, that a door's key
// functions accept from the client (a header, an API key, gRPC metadata,
// a request's method) unless their MaxKeyLen option says otherwise. Both
// doors hold the client's keys to this one bound: a limiter keeps every
// active key in memory, and the client chooses these, so without a bound a
// hundred distinct 1 MB keys would hold 100 MB until they went idle. 256
// bytes holds any API key or token in common use.
const DefaultMaxKeyLen = 256
