package httplimit

import (
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit"
)

// QuotaExceededType is the problem type of DefaultDeny's body: the
// "quota-exceeded" type that draft-ietf-httpapi-ratelimit-headers-11
// (section 5.1) asks IANA to register.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// DefaultDeny responds 429 Too Many Requests with an RFC 9457
// application/problem+json body of type QuotaExceededType, naming the
// violated policies as the draft's "violated-policies" member:
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
//	 "title":"Too Many Requests","status":429,
//	 "detail":"retry after 2 seconds","violated-policies":["default"]}
//
// A request whose cost exceeds a policy's quota gets the detail "request
// cost exceeds the policy's quota" and no Retry-After.
//
// A request that was not judged against the client's limit (d.Err set)
// gets 503 Service Unavailable instead, of type about:blank: with the
// detail "too many clients to limit at once; retry after N seconds" when a
// full limiter had no room for the client's key (atomiclimit.ErrTooManyKeys),
// and "the rate limit could not be checked; retry after N seconds" when a
// limiter could not decide and failed closed.
//
// The status is the server's to choose: a Config.Deny of its own writes any
// response (some servers answer every limited request 503 "busy, try
// later"; see the example); the rate-limit headers, Retry-After included,
// are already set when it runs.
func DefaultDeny(w http.ResponseWriter, r *http.Request, d Denial) {
	b := make([]byte, 0, 256)
	if d.Err != nil {
		b = append(b, `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"`...)
		if errors.Is(d.Err, atomiclimit.ErrTooManyKeys) {
			b = append(b, "too many clients to limit at once"...)
		} else {
			b = append(b, "the rate limit could not be checked"...)
		}
		if d.RetryAfter >= 0 {
			b = append(b, "; "...)
			b = appendRetry(b, d.RetryAfter)
		}
		b = append(b, "\"}\n"...)
		writeProblem(w, http.StatusServiceUnavailable, b, nil)
		return
	}
	writeProblem(w, http.StatusTooManyRequests, appendQuotaExceeded(b, d.Policies, d.RetryAfter, http.StatusTooManyRequests), nil)
}

// appendQuotaExceeded appends the quota-exceeded problem with status for
// the violated policies and the Retry-After ra (a Denial's).
func appendQuotaExceeded(b []byte, policies []string, ra int64, status int) []byte {
	b = append(b, `{"type":"`+QuotaExceededType+`","title":"`...)
	b = append(b, http.StatusText(status)...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"detail":"`...)
	if ra < 0 {
		b = append(b, "request cost exceeds the policy's quota"...)
	} else {
		b = appendRetry(b, ra)
	}
	b = append(b, `","violated-policies":[`...)
	for i, p := range policies {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, p)
	}
	return append(b, "]}\n"...)
}

// A problemCache keeps DefaultDeny's bodies for a denial by one policy
// alone, by Retry-After: direct-mapped, so that a flood of denials builds
// each body once per second of wait. It is safe for concurrent use.
type problemCache struct {
	names []string // the policy, as Denial.Policies names it
	slots [problemSlots]atomic.Pointer[problem]
}

const problemSlots = 16

// A problem is a kept body and its Content-Length.
type problem struct {
	ra     int64
	body   []byte   // never written after it is kept
	length []string // a field value (values)
}

// get returns the body of a 429 for the policy alone with Retry-After ra
// (-1: never admitted), building it on a miss.
func (c *problemCache) get(ra int64) *problem {
	slot := &c.slots[uint64(ra+1)%problemSlots]
	if p := slot.Load(); p != nil && p.ra == ra {
		return p
	}
	body := appendQuotaExceeded(nil, c.names, ra, http.StatusTooManyRequests)
	p := &problem{ra: ra, body: body, length: one(strconv.Itoa(len(body)))}
	slot.Store(p)
	return p
}

// appendRetry appends "retry after N second(s)".
func appendRetry(b []byte, s int64) []byte {
	b = append(b, "retry after "...)
	b = strconv.AppendInt(b, s, 10)
	if s == 1 {
		return append(b, " second"...)
	}
	return append(b, " seconds"...)
}

// RejectOnError is the default ErrorHandler: it responds with an RFC 9457
// problem, 400 Bad Request when the request lacks its key or has an invalid
// one (ErrNoKey, ErrInvalidKey, ErrCost), and 500 Internal Server Error
// otherwise (RemoteAddr not an address, a user key function's error). The
// error's text is not sent to the client.
func RejectOnError(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	status, detail := http.StatusInternalServerError, "the request could not be rate limited"
	if errors.Is(err, ErrNoKey) || errors.Is(err, ErrInvalidKey) || errors.Is(err, ErrCost) {
		status, detail = http.StatusBadRequest, "the request lacks a valid rate-limit key"
	}
	b := make([]byte, 0, 160)
	b = append(b, `{"type":"about:blank","title":"`...)
	b = append(b, http.StatusText(status)...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"detail":"`...)
	b = append(b, detail...)
	b = append(b, "\"}\n"...)
	writeProblem(w, status, b, nil)
}

// ServeOnError is an ErrorHandler that fails open: it serves the request
// without a limit. With a key a client controls (a header, an API key), a
// client that omits it is then never limited.
func ServeOnError(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	next.ServeHTTP(w, r)
}

// The constant header values of a problem, shared (see values).
var (
	problemType = one("application/problem+json")
	nosniff     = one("nosniff")
)

// writeProblem writes a problem response; length is len(body) as a field
// value, or nil to format it.
func writeProblem(w http.ResponseWriter, status int, body []byte, length []string) {
	if length == nil {
		length = one(strconv.Itoa(len(body)))
	}
	h := w.Header()
	h["Content-Type"] = problemType
	h["Content-Length"] = length
	h["X-Content-Type-Options"] = nosniff
	w.WriteHeader(status)
	w.Write(body)
}

// appendJSONString appends s, printable ASCII (policy names are checked),
// as a JSON string. For printable ASCII, JSON and Structured Fields quote
// alike: a '"' and a '\\' are escaped with a backslash, nothing else.
func appendJSONString(b []byte, s string) []byte { return appendString(b, s) }
