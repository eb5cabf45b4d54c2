package grpclimit

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/atomiclimit/atomiclimit/httplimit"
)

// A KeyFunc returns the key a call is limited under: its partition. ctx is
// the call's context (on a server: the peer, the incoming metadata, and
// whatever the interceptors before this one added; on a client: the
// outgoing one) and fullMethod is "/package.Service/Method". An error sends
// the call down the error path (Config.OnError) instead. Key functions run
// on every call: see each one's doc for what it allocates.
type KeyFunc[K comparable] func(ctx context.Context, fullMethod string) (K, error)

// ErrNoKey is returned by a key function when the call lacks what it keys on
// (no metadata value, no verified certificate).
var ErrNoKey = errors.New("grpclimit: call has no key")

// ErrInvalidKey is returned by a key function for a key longer than its
// bound (MaxKeyLen), and by APIKey when its validation function rejects
// the key.
var ErrInvalidKey = errors.New("grpclimit: invalid key")

// A KeyOption configures a key function that reads bytes the client
// chooses: APIKey.
type KeyOption interface{ applyKey(*keyConfig) }

// keyConfig is what KeyOptions set.
type keyConfig struct {
	maxLen int // the longest key accepted, in bytes
}

// MaxKeyLen bounds the keys a key function accepts to n bytes: a longer
// key is ErrInvalidKey (InvalidArgument with RejectOnError), and never
// reaches a limiter. A limiter holds every active key in memory, and the
// client chooses these: without a bound a hundred distinct 1 MB keys would
// hold 100 MB until they went idle.
//
// Without it, the bound is httplimit.DefaultMaxKeyLen, 256 bytes, which
// holds any API key or token in common use: the same for every key
// function of both doors that reads the client's bytes (APIKey and
// FullMethod here; httplimit's Header, APIKey and Method). FullMethod,
// which takes no option, holds to that default. n < 1 accepts no key at
// all.
func MaxKeyLen(n int) KeyOption { return maxKeyLen(n) }

type maxKeyLen int

func (n maxKeyLen) applyKey(c *keyConfig) { c.maxLen = int(n) }

// keyConfigOf returns the configuration opts make of the default (a nil
// option changes nothing).
func keyConfigOf(opts []KeyOption) keyConfig {
	c := keyConfig{maxLen: httplimit.DefaultMaxKeyLen}
	for _, o := range opts {
		if o != nil {
			o.applyKey(&c)
		}
	}
	return c
}

// APIKey keys a call on an API key in the named incoming metadata (a key
// such as "x-api-key"; any case, read lower-cased as gRPC sends it). For
// "authorization" the scheme ("Bearer ", any case) is stripped; surrounding
// whitespace is trimmed in any field (httplimit.Credentials reads the
// scheme). A missing key is ErrNoKey; a key longer than the bound
// (MaxKeyLen: 256 bytes by default) is ErrInvalidKey.
//
// valid, if not nil, must accept the key, or the call fails with
// ErrInvalidKey. Without it any string is a key: a client that invents keys
// gets a fresh burst with each, so either validate here or limit after
// authentication. It reads the metadata with
// metadata.ValueFromIncomingContext, which copies the value slice: one
// allocation per call.
func APIKey(name string, valid func(key string) bool, opts ...KeyOption) KeyFunc[string] {
	name = strings.ToLower(name)
	auth := name == "authorization"
	limit := keyConfigOf(opts).maxLen
	return func(ctx context.Context, _ string) (string, error) {
		var k string
		if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 {
			k = strings.Trim(v[0], " \t") // optional whitespace, as in HTTP
			if auth {
				if cred, ok := httplimit.Credentials(k); ok {
					k = cred
				}
			}
		}
		switch {
		case k == "":
			return "", ErrNoKey
		case len(k) > limit:
			return "", ErrInvalidKey
		case valid != nil && !valid(k):
			return "", ErrInvalidKey
		}
		return k, nil
	}
}

// FullMethod keys a call on its full method name, "/package.Service/Method",
// so that all calls of a method share one limit. It allocates nothing. The
// server hands the interceptors only the methods it registered, unless it
// has an UnknownServiceHandler; then the client chooses the name, and one
// longer than the key functions' default bound (256 bytes, see MaxKeyLen)
// is ErrInvalidKey.
func FullMethod(_ context.Context, fullMethod string) (string, error) {
	switch {
	case fullMethod == "":
		return "", ErrNoKey
	case len(fullMethod) > httplimit.DefaultMaxKeyLen:
		return "", ErrInvalidKey
	}
	return fullMethod, nil
}

// CertSubject keys a call on the authenticated identity of an mTLS peer: the
// subject of the leaf of its verified certificate chain, as
// pkix.Name.String formats it ("CN=client-a,O=Example"). The server's
// tls.Config must verify client certificates (ClientAuth
// RequireAndVerifyClientCert or VerifyClientCertIfGiven); a call without a
// verified chain is ErrNoKey. It formats the subject on every call (it
// allocates). For an identity another interceptor put in the context (a
// token's subject), write a KeyFunc that reads it, and chain this
// interceptor after that one.
func CertSubject(ctx context.Context, _ string) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", ErrNoKey
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", ErrNoKey
	}
	return info.State.VerifiedChains[0][0].Subject.String(), nil
}

// Compose keys a call on both a and b: Compose(clientIP, FullMethod) limits
// each client on each method separately. An error from either is the
// error. The key is an httplimit.Pair, comparable when its parts are, so
// a Keyed of it needs no string formatting.
func Compose[A, B comparable](a KeyFunc[A], b KeyFunc[B]) KeyFunc[httplimit.Pair[A, B]] {
	return func(ctx context.Context, m string) (httplimit.Pair[A, B], error) {
		ka, err := a(ctx, m)
		if err != nil {
			return httplimit.Pair[A, B]{}, err
		}
		kb, err := b(ctx, m)
		if err != nil {
			return httplimit.Pair[A, B]{}, err
		}
		return httplimit.Pair[A, B]{First: ka, Second: kb}, nil
	}
}
