package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The registry finds every registration by its code, as a string or as
// bytes, through removals that shift the table's entries, and lists the
// live ones in the order they were registered; a removed code is found
// no more and may be registered again, at the end of the order.
func TestRegistryFindsWhatAMapWould(t *testing.T) {
	t.Parallel()
	var g registry
	model := map[string]*registration{}
	var order []string
	rnd := rand.New(rand.NewPCG(1, 2))
	shared := &Shared{}
	ordered, deferred, lastOrdered := 0, 0, ""
	seen := map[string]bool{"absent": true}
	for step := range 20_000 {
		// Runs of codes in increasing order (which add files later, at
		// once), and codes at random, repeats and removals among them.
		code := fmt.Sprintf("task-%04d", rnd.IntN(3_000))
		if step/500%2 == 0 {
			code = fmt.Sprintf("thread-%05d", ordered)
			switch rnd.IntN(20) {
			case 0: // one of those filed later, again
				code = fmt.Sprintf("thread-%05d", rnd.IntN(ordered+1))
			case 1: // the last one again
				code = lastOrdered
			default:
				ordered += 1 + rnd.IntN(3)
			}
			lastOrdered = code
		}
		seen[code] = true
		if r := model[code]; r != nil && rnd.IntN(3) == 0 {
			r.state = &taskState{code: code}
			g.remove(r)
			require.Nil(t, r.state, "a removed registration keeps no state")
			delete(model, code)
			order = slices.DeleteFunc(order, func(c string) bool { return c == code })
		} else {
			r, added := g.add(code, step, shared)
			require.Equal(t, model[code] == nil, added, "step %d: add %s", step, code)
			if added {
				model[code] = r
				order = append(order, code)
			}
			require.Same(t, model[code], r, "step %d: add %s returns the registration of the code", step, code)
			if g.indexed < g.n {
				deferred++
			}
		}
		require.Equal(t, len(model), g.len())
		if step%250 == 0 || step == 19_999 {
			for c := range seen {
				require.Same(t, model[c], g.get(c), "step %d: get %s", step, c)
				next := rnd.IntN(g.n + 2)
				require.Same(t, model[c], g.lookup([]byte(c), &next), "step %d: lookup %s", step, c)
				if r := model[c]; r != nil {
					require.Same(t, r, g.at(next-1), "step %d: lookup %s leaves next after it", step, c)
				}
			}
			var listed []string
			next := 0
			for r := range g.all() {
				listed = append(listed, r.code)
				require.Same(t, r, g.lookup([]byte(r.code), &next), "step %d: lookup %s in order", step, r.code)
			}
			require.Equal(t, order, listed, "step %d", step)
		}
	}
	require.Greater(t, g.n, regSlab, "the registrations fill more than a slab")
	require.Greater(t, deferred, 1000, "codes in order were filed later")
}

// A registration keeps its address while later ones are added: the
// dispatcher holds it outside the view's lock.
func TestRegistryKeepsRegistrationsInPlace(t *testing.T) {
	t.Parallel()
	var g registry
	first, added := g.add("first", nil, &Shared{})
	require.True(t, added)
	for i := range 5 * regSlab {
		g.add(fmt.Sprint(i), nil, &Shared{})
	}
	require.Same(t, first, g.get("first"))
	require.Equal(t, "first", first.code)
}
