package redislimit

import (
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"unsafe"
)

// errKeyType: NewKeyed or NewKeyedRule for a key type K that has no Redis
// key encoding (a float, a bool, a struct, an interface, … : see the
// package doc, "Keys"), without WithKeyFunc; or a WithKeyFunc whose
// function does not take K, or is nil.
var errKeyType = configErr("no redis key encoding for the key type")

// WithKeyFunc makes f write a key into its Redis key, which is then the
// prefix and f(key) (in a hash tag under WithHashTag). A Limiter keyed by a
// type with no encoding of its own (the package doc, "Keys") needs it; for
// the others it replaces the encoding. f's K must be the Limiter's key type
// (ErrConfig otherwise). f must be deterministic and one-to-one: two
// different keys written as one string share one state in Redis. It is
// called once per call to Redis (not for the answers of the over-limit
// cache or of a static limit), from many goroutines at once.
func WithKeyFunc[K comparable](f func(K) string) Option {
	return optionFunc(func(c *config) { c.keyFunc = f })
}

// keyKind is how a Limiter writes its keys into Redis keys.
type keyKind uint8

const (
	keyString   keyKind = iota + 1 // underlying string: its bytes as they are
	keySigned                      // underlying int, int8 … int64: decimal
	keyUnsigned                    // underlying uint, uint8 … uint64, uintptr: decimal
	keyBytes                       // underlying [N]byte: its N bytes
	keyPrefix                      // netip.Prefix: Addr/Bits
	keyAddr                        // netip.Addr: its String form
	keyFunc                        // WithKeyFunc's function
)

// A keyCodec writes a K into a Redis key.
type keyCodec[K comparable] struct {
	kind keyKind
	// size is K's, for keySigned, keyUnsigned and keyBytes.
	size uintptr
	fn   func(K) string // keyFunc only
}

// maxKeyText is the most bytes a key of kind k writes (but for an IPv6
// zone, which may be longer): an int64 or a uint64 in decimal, an IPv6
// address and "/128".
var maxKeyText = [...]int{keySigned: 20, keyUnsigned: 20, keyPrefix: 43, keyAddr: 39}

// newKeyCodec returns the codec of K: fn's (WithKeyFunc's option value, if
// not nil), else K's own encoding, or an error wrapping ErrConfig.
func newKeyCodec[K comparable](fn any) (keyCodec[K], error) {
	t := reflect.TypeFor[K]()
	if fn != nil {
		f, ok := fn.(func(K) string)
		switch {
		case !ok:
			return keyCodec[K]{}, fmt.Errorf("%w: WithKeyFunc's function is a %T, and the Limiter's keys are %v", errKeyType, fn, t)
		case f == nil:
			return keyCodec[K]{}, fmt.Errorf("%w: WithKeyFunc(nil)", errKeyType)
		}
		return keyCodec[K]{kind: keyFunc, fn: f}, nil
	}
	c := keyCodec[K]{size: t.Size()}
	switch t {
	case reflect.TypeFor[netip.Prefix]():
		c.kind = keyPrefix
	case reflect.TypeFor[netip.Addr]():
		c.kind = keyAddr
	default:
		switch t.Kind() {
		case reflect.String:
			c.kind = keyString
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			c.kind = keySigned
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			c.kind = keyUnsigned
		case reflect.Array:
			if t.Elem().Kind() == reflect.Uint8 {
				c.kind = keyBytes
			}
		}
	}
	if c.kind == 0 {
		return keyCodec[K]{}, fmt.Errorf("%w: %v (give WithKeyFunc)", errKeyType, t)
	}
	return c, nil
}

// Key returns the Redis key that holds key's state: the prefix
// (WithKeyPrefix, "atomiclimit:" otherwise) and key as the package doc
// says ("Keys"): a string as it is, so that "user:42" is held at
// "atomiclimit:user:42"; a netip.Prefix as 2001:db8::/64, an integer in
// decimal. Under WithHashTag key is wrapped in a hash tag ({key}), so that
// limiters that share a key (several bands of one user, with different
// prefixes) keep it in one Redis Cluster slot. (Redis hashes a key with an
// empty tag, "{}", whole: under WithHashTag the empty key is not
// co-located.)
//
// For a string key it makes one allocation, the Redis key; for a key of
// another type with an encoding of its own, one too: the key's text is
// written into the Redis key directly.
func (l *Limiter[K]) Key(key K) string {
	var s string
	switch l.keys.kind {
	case keyString:
		// K's underlying type is string (newKeyCodec): the same layout.
		s = *(*string)(unsafe.Pointer(&key))
	case keyFunc:
		s = l.keys.fn(key)
	default:
		return l.encode(key)
	}
	if l.hashTag {
		return l.prefix + "{" + s + "}"
	}
	return l.prefix + s
}

// encode is Key for the kinds that are written as text or bytes: the
// prefix, the tag's braces and the key are appended to one buffer, which
// becomes the string. Most keys fit a buffer on the stack, which the
// string copies, at its own length; a longer one (a long prefix) is
// written into a buffer on the heap that becomes the string without a
// copy. Either way it is one allocation, but for an IPv6 zone longer than
// the room left.
func (l *Limiter[K]) encode(key K) string {
	n := len(l.prefix) + 2
	if l.keys.kind == keyBytes {
		n += int(l.keys.size)
	} else {
		n += maxKeyText[l.keys.kind]
	}
	if n <= keyStack {
		var buf [keyStack]byte
		return string(l.appendKey(buf[:0], key))
	}
	b := l.appendKey(make([]byte, 0, n), key)
	// b is never written again: the string may share its bytes (as
	// strings.Builder's does).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// keyStack is the room encode writes a key into on the stack.
const keyStack = 96

// appendKey appends key's Redis key, prefix included, to b.
func (l *Limiter[K]) appendKey(b []byte, key K) []byte {
	b = append(b, l.prefix...)
	if l.hashTag {
		b = append(b, '{')
	}
	// Each case reads key as the type its kind says K's underlying type is
	// (newKeyCodec): the same size and layout.
	p := unsafe.Pointer(&key)
	switch l.keys.kind {
	case keySigned:
		var v int64
		switch l.keys.size {
		case 1:
			v = int64(*(*int8)(p))
		case 2:
			v = int64(*(*int16)(p))
		case 4:
			v = int64(*(*int32)(p))
		default:
			v = *(*int64)(p)
		}
		b = strconv.AppendInt(b, v, 10)
	case keyUnsigned:
		var v uint64
		switch l.keys.size {
		case 1:
			v = uint64(*(*uint8)(p))
		case 2:
			v = uint64(*(*uint16)(p))
		case 4:
			v = uint64(*(*uint32)(p))
		default:
			v = *(*uint64)(p)
		}
		b = strconv.AppendUint(b, v, 10)
	case keyBytes:
		b = append(b, unsafe.Slice((*byte)(p), l.keys.size)...)
	case keyPrefix:
		b = appendPrefix(b, *(*netip.Prefix)(p))
	case keyAddr:
		b = appendAddr(b, *(*netip.Addr)(p))
	}
	if l.hashTag {
		b = append(b, '}')
	}
	return b
}

// appendAddr appends a's String form: "192.0.2.1", "2001:db8::1",
// "fe80::1%eth0", and "invalid IP" for the zero Addr.
func appendAddr(b []byte, a netip.Addr) []byte {
	if !a.IsValid() {
		return append(b, "invalid IP"...)
	}
	return a.AppendTo(b)
}

// appendPrefix appends p's address in its String form, "/" and p.Bits() in
// decimal: p.String() for every valid prefix ("2001:db8::/64"), and a text
// of its own for each invalid one ("invalid IP/-1" for the zero Prefix,
// "192.0.2.1/-1" for PrefixFrom with too many bits), where String says
// "invalid Prefix" for them all. A Prefix is exactly its Addr and its Bits,
// so two different prefixes never write one text.
func appendPrefix(b []byte, p netip.Prefix) []byte {
	b = appendAddr(b, p.Addr())
	b = append(b, '/')
	return strconv.AppendInt(b, int64(p.Bits()), 10)
}
