package atomiclimit

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// Bands holds each key to every rule at once ("60/min and 1000/h and
// 10000 per rolling day"): a request is admitted only if every band admits
// it, and taken from all of them (see "Choosing a rule" in the package
// doc).
func Bands(rules ...Rule) Rule { return Rule{&bandsRule{slices.Clone(rules)}} }

// bandsRule is a pointer, so that a Rule stays comparable.
type bandsRule struct{ bands []Rule }

func (b *bandsRule) algorithms(src *timebase.Source, start int64) ([]algo.Algorithm, error) {
	if len(b.bands) == 0 {
		return nil, fmt.Errorf("%w: Bands with no band", ErrInvalidRule)
	}
	algs := make([]algo.Algorithm, len(b.bands)) // one band is that band
	for i, band := range b.bands {
		a, err := b.band(i, band, src, start)
		if err != nil {
			return nil, err
		}
		algs[i] = a
	}
	return algs, nil
}

// band builds band i: one algorithm, which limits something.
func (b *bandsRule) band(i int, band Rule, src *timebase.Source, start int64) (algo.Algorithm, error) {
	if band.k == nil {
		return nil, fmt.Errorf("%w: band %d (%v): the zero Rule", ErrInvalidRule, i, band)
	}
	if _, nested := band.k.(*bandsRule); nested {
		return nil, fmt.Errorf("%w: Bands inside Bands (list every band once)", ErrInvalidRule)
	}
	algs, err := band.k.algorithms(src, start)
	if err != nil {
		return nil, fmt.Errorf("%w: band %d (%v): %w", ErrInvalidRule, i, band, err)
	}
	if p := algo.Params(algs[0]); p != nil && p.IsUnlimited() {
		// It is never written, so it cannot carry the proof of the bands'
		// eviction (see algo.Set), and it limits nothing anyway.
		return nil, fmt.Errorf("%w: band %d is Unlimited: it limits nothing; leave it out", ErrInvalidRule, i)
	}
	return algs[0], nil
}

func (b *bandsRule) maxN() int {
	n := math.MaxInt
	for _, band := range b.bands {
		if band.k == nil {
			return 0
		}
		n = min(n, band.k.maxN())
	}
	return n
}

func (b *bandsRule) String() string {
	parts := make([]string, len(b.bands))
	for i, band := range b.bands {
		parts[i] = band.String()
	}
	return strings.Join(parts, " and ")
}

func (b *bandsRule) visit(v RuleVisitor) { v.Bands(slices.Clone(b.bands)...) }
