package httplimit

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// ErrConfig is returned by New for an invalid Config, by NewTransport for
// an invalid TransportConfig, by ClientIP and NewIPResolver for invalid
// IPOptions, and by NewPolicyFields for a name or unit that is not
// printable ASCII.
var ErrConfig = errors.New("httplimit: invalid config")

// ErrCost is the error a request fails with when Config.Cost (or
// TransportConfig.Cost) returns a negative cost.
var ErrCost = errors.New("httplimit: negative request cost")

// Config configures a Middleware. Key and Policy.Limiter are required; the
// zero value of every other field is a working default.
type Config[K comparable] struct {
	// Key returns a request's key (ClientIP, Header, APIKey, Route,
	// Method, Compose, or any function).
	Key KeyFunc[K]
	// Policies are the limits every request is checked against (that
	// Exclude does not pass), all at once: a request is admitted only if
	// every policy admits it, and when one denies, what the others took
	// is given back (see "Stacked policies" in the package doc). At most 8,
	// counting a route's. A policy's Name is its item in the headers, the
	// problem body and the hooks: printable ASCII, unique among the
	// policies one request can meet; empty is "default" for a lone entry.
	// Any atomiclimit.KeyedLimiter serves: *atomiclimit.Keyed for every
	// rule, or a redislimit.Limiter for a limit a fleet shares.
	Policies []atomiclimit.Policy[K]
	// Routes adds a policy for the requests of a ServeMux pattern, on top
	// of Policies, e.g. {"POST /login": {Name: "login", Limiter: strict}}.
	// A request's pattern is r.Pattern, or, when that is empty and Mux is
	// set, the pattern Mux would route it to.
	Routes map[string]atomiclimit.Policy[K]
	// Mux finds the pattern of a request the middleware sees before the
	// mux does (a middleware that wraps the mux). Required with Routes (New
	// fails without it); r.Pattern is used first when the mux has set it.
	Mux *http.ServeMux
	// Cost returns the number of tokens a request takes (nil: 1). A cost of
	// 0 passes without taking any (the headers show the bucket as it is);
	// a cost above the burst is always denied, with no Retry-After; a
	// negative cost fails with ErrCost.
	Cost func(r *http.Request) int
	// Exclude, if it returns true, passes the request through untouched: no
	// decision, no headers, no hook.
	Exclude func(r *http.Request) bool
	// DryRun decides every request as usual, taking tokens, writing the
	// headers and calling the hooks, but serves a request even when it is
	// denied (the Denied hook still reports it, and no Retry-After is
	// written). Set Headers to HeadersNone to hide the trial from clients.
	DryRun bool
	// Headers selects the headers written (zero: DefaultHeaders).
	Headers HeaderSet
	// QuotaUnit, if set, is the RateLimit-Policy qu parameter ("requests"
	// is the draft's default; "content-bytes" goes with a byte-counting
	// Cost).
	QuotaUnit string
	// PartitionKey, if set, returns the bytes the pk parameter carries for
	// a key (nil: no pk). The draft advises against keys that reveal
	// sensitive information, so return an opaque identifier, not the key.
	// Each header that carries pk is built per request (it allocates).
	PartitionKey func(key K) []byte
	// Deny writes the response to a denied request, after the headers are
	// set (nil: DefaultDeny).
	Deny DenyFunc
	// OnError handles a request whose key or cost could not be determined
	// (nil: RejectOnError).
	OnError ErrorHandler
	// Hook receives the middleware's events (nil: none, at no cost).
	Hook *atomiclimit.Hook
}

// A Denial describes a denied request to a DenyFunc.
type Denial struct {
	// Policies names the policies that denied the request: every one
	// violated (the first that denied, and those after it that would have),
	// or the one whose limiter failed closed.
	Policies []string
	Cost     int           // the tokens the request asked for
	Decision gcra.Decision // the decision of the policy with the longest wait
	// RetryAfter is the Retry-After in whole seconds: the longest any
	// violated policy needs (rounded up, and never less than its RateLimit
	// t), or -1 if the request can never be admitted (its cost exceeds a
	// policy's quota, or a limit is DenyAll).
	RetryAfter int64
	// Err is nil for a rate-limit denial (429). Otherwise the request was
	// not judged against the client's limit, and DefaultDeny answers 503
	// Service Unavailable: Err is atomiclimit.ErrTooManyKeys when a full
	// limiter (WithMaxKeys, RejectNew) had no room for the client's key
	// (the server's capacity; RetryAfter is when it may have room), or the
	// limiter's error when it could not decide (a remote store is down) and
	// its outage policy failed closed. (A local fallback's own denial is
	// that policy's 429, with Err nil.)
	Err error
}

// A DenyFunc writes the response to a denied request. The rate-limit headers
// are already set.
type DenyFunc func(w http.ResponseWriter, r *http.Request, d Denial)

// An ErrorHandler handles a request the middleware could not decide (its key
// function or its cost failed). It may respond, or serve next without a
// limit.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, next http.Handler, err error)

// A Middleware limits the requests that pass through it. It is safe for
// concurrent use. Build one with New and install it with Handler.
type Middleware[K comparable] struct {
	key     KeyFunc[K]
	def     *stack[K]            // Policies; nil if there are none
	routes  map[string]*stack[K] // Policies and the route's
	mux     *http.ServeMux
	cost    func(*http.Request) int
	exclude func(*http.Request) bool
	dryRun  bool
	headers HeaderSet
	pk      func(K) []byte
	deny    DenyFunc // nil: DefaultDeny, with its bodies kept (stack.problems)
	onError ErrorHandler
	hook    *atomiclimit.Hook // nil: none
	pols    policies[K]       // every policy once: Policies, then the routes' (for ReportEvictions)
}

// New validates c and returns the middleware it describes.
func New[K comparable](c Config[K]) (*Middleware[K], error) {
	if c.Key == nil {
		return nil, fmt.Errorf("%w: no Key function", ErrConfig)
	}
	if c.Headers&^(DefaultHeaders|HeaderLegacy|HeadersNone) != 0 {
		return nil, fmt.Errorf("%w: unknown header bits %#x", ErrConfig, uint8(c.Headers))
	}
	if err := checkString("QuotaUnit", c.QuotaUnit); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if len(c.Policies) == 0 && len(c.Routes) == 0 {
		return nil, fmt.Errorf("%w: no policy (Policies and Routes are empty)", ErrConfig)
	}
	m := &Middleware[K]{
		key: c.Key, mux: c.Mux, cost: c.Cost, exclude: c.Exclude, dryRun: c.DryRun,
		headers: c.Headers, pk: c.PartitionKey, deny: c.Deny, onError: c.OnError, hook: c.Hook,
	}
	m.pols.unit = c.QuotaUnit
	if m.headers == 0 {
		m.headers = DefaultHeaders
	}
	if m.onError == nil {
		m.onError = RejectOnError
	}
	def, err := m.pols.addList("Policies", c.Policies)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if len(def) > 0 {
		if m.def, err = newStack("Policies", def); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if len(c.Routes) > 0 {
		if c.Mux == nil {
			// Without the mux, a middleware that wraps it sees every request
			// before routing (r.Pattern empty): no route would ever match,
			// and every route's limit would be silently ignored.
			return nil, fmt.Errorf("%w: Routes need Mux, the ServeMux the patterns belong to", ErrConfig)
		}
		m.routes = make(map[string]*stack[K], len(c.Routes))
		for _, pattern := range slices.Sorted(maps.Keys(c.Routes)) {
			what := "route " + strconv.Quote(pattern)
			pol, err := m.pols.add(what, c.Routes[pattern])
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrConfig, err)
			}
			if m.routes[pattern], err = newStack(what, append(slices.Clip(def), pol)); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrConfig, err)
			}
		}
	}
	return m, nil
}

// Handler wraps next: the middleware as a func(http.Handler) http.Handler.
func (m *Middleware[K]) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

// stackFor returns the policies r is checked against, or nil for none.
func (m *Middleware[K]) stackFor(r *http.Request) *stack[K] {
	if m.routes == nil {
		return m.def
	}
	if s, ok := m.routes[patternOf(r, m.mux)]; ok {
		return s
	}
	return m.def
}

// fail reports err, for which r could not be limited (its key or its cost
// failed), under the first policy r would have met, and hands r to the
// ErrorHandler.
func (m *Middleware[K]) fail(w http.ResponseWriter, r *http.Request, next http.Handler, s *stack[K], err error) {
	if m.hook != nil && m.hook.Error != nil {
		m.hook.Error(s.Policy(0).Name, err)
	}
	m.onError(w, r, next, err)
}

// ReportEvictions passes to the hook, as Evicted events, the keys each
// policy's limiter has removed since the last call: idle keys and, under
// atomiclimit.EvictStalest, active ones. It reads the limiters' counters
// (limiters with a Stats() atomiclimit.Stats method), so call it
// periodically or before a metrics scrape; the limiters do not report
// evictions as they happen. A limiter shared by several policies reports
// its evictions under each of them. Without a hook it does nothing.
func (m *Middleware[K]) ReportEvictions() { m.pols.reportEvictions(m.hook) }
