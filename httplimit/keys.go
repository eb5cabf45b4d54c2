package httplimit

import (
	"errors"
	"net/http"
	"strings"
)

// A KeyFunc returns the key a request is limited under: its partition. An
// error sends the request down the error path (Config.OnError) instead.
// Key functions run on every request: they should not allocate. None of
// this package's does.
type KeyFunc[K comparable] func(r *http.Request) (K, error)

// ErrNoKey is returned by a key function when the request lacks what it keys
// on (a missing header, an empty pattern).
var ErrNoKey = errors.New("httplimit: request has no key")

// ErrInvalidKey is returned by a key function for a key longer than its
// bound (MaxKeyLen), and by APIKey when its validation function rejects
// the key.
var ErrInvalidKey = errors.New("httplimit: invalid key")

// A KeyOption configures a key function that reads bytes the client
// chooses: Header and APIKey.
type KeyOption interface{ applyKey(*keyConfig) }

// keyConfig is what KeyOptions set.
type keyConfig struct {
	maxLen int // the longest key accepted, in bytes
}

// MaxKeyLen bounds the keys a key function accepts to n bytes: a longer
// key is ErrInvalidKey (400 Bad Request with RejectOnError), and never
// reaches a limiter. A limiter holds every active key in memory, and the
// client chooses these: without a bound a hundred distinct 1 MB keys would
// hold 100 MB until they went idle.
//
// Without it, the bound is DefaultMaxKeyLen, 256 bytes, which holds any
// API key or token in common use: the same for every key function of both
// doors that reads the client's bytes (Header, APIKey and Method here;
// grpclimit's APIKey and FullMethod). Method, which takes no option, holds
// to that default. n < 1 accepts no key at all.
func MaxKeyLen(n int) KeyOption { return maxKeyLen(n) }

type maxKeyLen int

func (n maxKeyLen) applyKey(c *keyConfig) { c.maxLen = int(n) }

// DefaultMaxKeyLen is the longest key, in bytes, that the key functions
// of both doors accept from the client (a header, an API key, a method;
// grpclimit's metadata and method names) unless their MaxKeyLen option
// says otherwise: one bound for every key a client chooses. A limiter
// keeps every active key in memory, so without a bound a hundred distinct
// 1 MB keys would hold 100 MB until they went idle. 256 bytes holds any
// API key or token in common use.
const DefaultMaxKeyLen = 256

// keyConfigOf returns the configuration opts make of the default (a nil
// option changes nothing).
func keyConfigOf(opts []KeyOption) keyConfig {
	c := keyConfig{maxLen: DefaultMaxKeyLen}
	for _, o := range opts {
		if o != nil {
			o.applyKey(&c)
		}
	}
	return c
}

// Header keys a request on the first value of the named header; a missing
// or empty header is ErrNoKey, one longer than the bound (MaxKeyLen: 256
// bytes by default) ErrInvalidKey. A header is only as trustworthy as
// whoever sets it: use one that your own proxy or authentication layer
// sets and strips from client requests, or a client chooses its own key,
// and with a new key a fresh burst.
func Header(name string, opts ...KeyOption) KeyFunc[string] {
	canon := http.CanonicalHeaderKey(name)
	limit := keyConfigOf(opts).maxLen
	return func(r *http.Request) (string, error) {
		v := r.Header[canon]
		switch {
		case len(v) == 0 || v[0] == "":
			return "", ErrNoKey
		case len(v[0]) > limit:
			return "", ErrInvalidKey
		}
		return v[0], nil
	}
}

// APIKey keys a request on an API key in the named header. For the
// Authorization header the scheme ("Bearer ", any case) is stripped;
// surrounding whitespace is trimmed in any header. A missing key, or a
// scheme with no credentials ("Bearer" alone), is ErrNoKey; a key longer
// than the bound (MaxKeyLen: 256 bytes by default) is ErrInvalidKey.
//
// valid, if not nil, must accept the key, or the request fails with
// ErrInvalidKey. Without it any string is a key: a client that invents keys
// gets a fresh burst with each, so either validate here (a lookup in a set of
// issued keys, a signature check) or run the limiter after authentication.
// The key is held in the limiter's memory while it is active: do not key on
// secrets such as Basic credentials.
func APIKey(header string, valid func(key string) bool, opts ...KeyOption) KeyFunc[string] {
	canon := http.CanonicalHeaderKey(header)
	auth := canon == "Authorization"
	limit := keyConfigOf(opts).maxLen
	return func(r *http.Request) (string, error) {
		k, bare := apiKey(r.Header[canon], auth)
		switch {
		case k == "", bare && strings.EqualFold(k, "Bearer"): // none, or the scheme without a token
			return "", ErrNoKey
		case len(k) > limit:
			return "", ErrInvalidKey
		case valid != nil && !valid(k):
			return "", ErrInvalidKey
		}
		return k, nil
	}
}

// Route keys a request on the ServeMux pattern that matched it (r.Pattern,
// Go 1.22 and later), so that every request to one route shares a bucket.
// r.Pattern is set only inside the mux: wrap the route's handler
// (mux.Handle(p, m.Handler(h))), or use RouteOf to wrap the whole mux. An
// empty pattern is ErrNoKey.
func Route(r *http.Request) (string, error) {
	if r.Pattern == "" {
		return "", ErrNoKey
	}
	return r.Pattern, nil
}

// RouteOf is Route for a middleware that wraps mux itself: when r.Pattern is
// empty it asks mux which pattern the request will match (mux.Handler),
// which repeats the mux's routing work. A request that matches no pattern
// is ErrNoKey.
func RouteOf(mux *http.ServeMux) KeyFunc[string] {
	return func(r *http.Request) (string, error) {
		if p := patternOf(r, mux); p != "" {
			return p, nil
		}
		return "", ErrNoKey
	}
}

func patternOf(r *http.Request, mux *http.ServeMux) string {
	if r.Pattern != "" || mux == nil {
		return r.Pattern
	}
	_, p := mux.Handler(r)
	return p
}

// Method keys a request on its method ("" counts as GET, as in net/http).
// net/http accepts any token as a method, up to its header limit: one
// longer than the key functions' default bound (256 bytes, see MaxKeyLen)
// is ErrInvalidKey.
func Method(r *http.Request) (string, error) {
	switch {
	case r.Method == "":
		return http.MethodGet, nil
	case len(r.Method) > DefaultMaxKeyLen:
		return "", ErrInvalidKey
	}
	return r.Method, nil
}

// A Pair is a composite key of two parts. It is comparable when its parts
// are, so a Keyed[Pair[A, B]] needs no string formatting.
type Pair[A, B comparable] struct {
	First  A
	Second B
}

// Compose keys a request on both a and b: Compose(clientIP, Route) limits each
// client on each route separately. An error from either is the error.
func Compose[A, B comparable](a KeyFunc[A], b KeyFunc[B]) KeyFunc[Pair[A, B]] {
	return func(r *http.Request) (Pair[A, B], error) {
		ka, err := a(r)
		if err != nil {
			return Pair[A, B]{}, err
		}
		kb, err := b(r)
		if err != nil {
			return Pair[A, B]{}, err
		}
		return Pair[A, B]{ka, kb}, nil
	}
}
