package grpclimit

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A limitError is the error a denied call fails with: its status, and the
// error it wraps for errors.Is (ErrLimited, or the limiter's own).
type limitError struct {
	st   *status.Status
	err  error
	text string // Error's text, kept for a shared error (keepText); "" if not
}

func (e *limitError) Error() string {
	if e.text != "" {
		return e.text
	}
	return e.st.Err().Error()
}

func (e *limitError) GRPCStatus() *status.Status { return e.st }
func (e *limitError) Unwrap() error              { return e.err }

// keepText keeps Error's text in e, for an error shared by many calls: it
// is formatted once, not by every call that asks. It must be called before
// e is shared.
func (e *limitError) keepText() { e.text = e.st.Err().Error() }

// retryDelay is the RetryInfo delay of a wait d: d rounded up to whole
// milliseconds. The exact wait would do for a client that reads
// nanoseconds, but many convert the delay to milliseconds, truncating
// (Java's Durations.toMillis does): rounded up, a client that waits what it
// was told, in either unit, is admitted.
func retryDelay(d time.Duration) time.Duration {
	const ms = time.Millisecond
	return max((d+ms-1)/ms*ms, ms)
}

// denied returns the error of a call the policies of s denied (out: its
// outcomes; den: Denied's summary): codes.ResourceExhausted with a
// RetryInfo (the longest wait a violated policy needs, unless one never
// admits the call) and a QuotaFailure with one violation per violated
// policy, in the configured order: subject and quota_id the policy's name,
// description its rule as configured (the outcome's Quota.String),
// quota_value its advertised quota (httplimit.Advertise).
func denied[K comparable](s *atomiclimit.Stack[K], out []atomiclimit.Outcome, den atomiclimit.Denial) error {
	var b strings.Builder
	b.WriteString(ErrLimited.Error())
	b.WriteString(": ")
	writePolicies(&b, den.Violated)
	qf := &errdetails.QuotaFailure{}
	for j := range s.Len() {
		o := &out[j]
		if o.Kind != atomiclimit.Violated {
			continue
		}
		var q int
		if o.Quota.Limit != math.MaxInt { // Unlimited advertises no quota
			q, _ = httplimit.Advertise(o.Quota)
		}
		name := s.Policy(j).Name
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
			Subject: name, QuotaId: name, Description: o.Quota.String, QuotaValue: int64(q),
		})
	}
	var st *status.Status
	if den.RetryAfter == atomiclimit.Never {
		b.WriteString("; the call's cost exceeds the quota")
		st = withDetails(codes.ResourceExhausted, b.String(), qf)
	} else {
		d := retryDelay(den.RetryAfter)
		b.WriteString("; retry after ")
		b.WriteString(d.String())
		st = withDetails(codes.ResourceExhausted, b.String(), &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}, qf)
	}
	return &limitError{st: st, err: ErrLimited}
}

// unavailable returns the error of a call that the policy name could not
// decide: its full limiter had no room for the key (ErrTooManyKeys), or its
// outage policy denied it (fail closed). codes.Unavailable, with a
// RetryInfo when the limiter named a wait. The limiter's error is wrapped
// for the server's interceptors, not sent to the client.
func unavailable(name string, o *atomiclimit.Outcome) error {
	var b strings.Builder
	if errors.Is(o.Err, atomiclimit.ErrTooManyKeys) {
		b.WriteString("grpclimit: too many clients to limit at once: ")
	} else {
		b.WriteString("grpclimit: the rate limit could not be checked: ")
	}
	writePolicies(&b, []string{name})
	var st *status.Status
	if ra := o.Decision.RetryAfter; ra > 0 && ra != atomiclimit.Never {
		d := retryDelay(ra)
		b.WriteString("; retry after ")
		b.WriteString(d.String())
		st = withDetails(codes.Unavailable, b.String(), &errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	} else {
		st = status.New(codes.Unavailable, b.String())
	}
	return &limitError{st: st, err: o.Err}
}

// gone returns the status of a call whose caller went away while a
// limiter decided (atomiclimit.Gone): its context's (Canceled,
// DeadlineExceeded), and DeadlineExceeded when the deadline passed before
// the context said so (a remote limiter saw it first). Never nil: the call
// is not served.
func gone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())
}

func writePolicies(b *strings.Builder, names []string) {
	if len(names) == 1 {
		b.WriteString("policy ")
	} else {
		b.WriteString("policies ")
	}
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(n))
	}
}

// withDetails returns the status of code and msg with details; if they
// cannot be marshalled (they always can), the status without them.
func withDetails(code codes.Code, msg string, details ...protoadapt.MessageV1) *status.Status {
	st := status.New(code, msg)
	if ds, err := st.WithDetails(details...); err == nil {
		return ds
	}
	return st
}

// RetryDelay returns the delay of the google.rpc.RetryInfo detail of a
// gRPC error, and whether it has one: what a client that honours RetryInfo
// waits before it calls again. The interceptors' denials carry one
// (codes.ResourceExhausted, and codes.Unavailable when a failing limiter
// named a wait); a call that can never be admitted has none.
func RetryDelay(err error) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return 0, false
	}
	for _, d := range gs.GRPCStatus().Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}
