package engine

import (
	"hash/maphash"
	"iter"
)

// This file is the registry of the handlers registered in this process
// (view.handlers). A replica of a million tasks keeps a million
// registrations: as a map[string]*registration, a slice of them in
// registration order and a small object each, they were a third of its
// heap, and the map's growth and probes much of its start-up CPU.

// registry holds the registrations of this process in the order they
// were registered, in slabs that are never reallocated (a *registration
// stays valid for good), and finds them by code through an open-addressed
// table of their positions: four bytes a slot and no pointer for the
// garbage collector to scan. It is guarded by view.mu; its zero value is
// empty and ready.
//
// Codes registered in increasing order, as a service's list of its tasks
// often is, cannot repeat one registered before: add files them in the
// table only when a code is looked up or comes out of order (index), all
// at once. A probe of the table per Register is a cache miss each, while
// filing a run of positions overlaps them.
type registry struct {
	slabs [][]registration // regSlab long each, but the last, which fills up
	n     int              // registrations made, removed ones included
	live  int
	// gone marks the positions of removed registrations (remove): nil
	// until one is.
	gone []uint64
	// table holds position+1 of each registration filed, 0 in an empty
	// slot, at the first empty slot from its code's hash on (linear
	// probing); its length is a power of two, at least twice live.
	table []uint32
	seed  maphash.Seed
	// indexed: the registrations from it on are not in table yet; each
	// has a code greater than every one before it, the last (greatest)
	// being last.
	indexed int
	last    string
}

// regSlab is how many registrations a slab holds.
const regSlab = 512

func (g *registry) at(pos int) *registration { return &g.slabs[pos/regSlab][pos%regSlab] }

func (g *registry) len() int { return g.live }

// home is the slot of the table where the search for code starts.
func (g *registry) home(code string) int {
	return int(maphash.String(g.seed, code) & uint64(len(g.table)-1)) //nolint:gosec // G115: masked to the table's length
}

// find returns the slot of code's position in the table, or of the empty
// slot where it would go (ok false). The table holds every registration
// (index).
func (g *registry) find(code string) (slot int, ok bool) {
	return g.probe(maphash.String(g.seed, code), func(r *registration) bool { return r.code == code })
}

// probe searches the table from the slot of hash on for the position of
// the registration that is names (find, lookup).
func (g *registry) probe(hash uint64, is func(*registration) bool) (slot int, ok bool) {
	mask := len(g.table) - 1
	for i := int(hash & uint64(mask)); ; i = (i + 1) & mask { //nolint:gosec // G115: masked to the table's length
		p := g.table[i]
		if p == 0 {
			return i, false
		}
		if is(g.at(int(p - 1))) {
			return i, true
		}
	}
}

// get returns the registration of code, nil when there is none.
func (g *registry) get(code string) *registration {
	if g.live == 0 {
		return nil
	}
	g.index()
	if i, ok := g.find(code); ok {
		return g.at(int(g.table[i] - 1))
	}
	return nil
}

// lookup is get of a code as bytes (of a row being read), made into no
// string. next is where the registration of the code is likely to be:
// rows read in the order their tasks were registered, as a table of
// tasks written at a first start is read back, find it there without a
// hash and a random read of the table; lookup sets it to the position
// after the registration found.
func (g *registry) lookup(code []byte, next *int) *registration {
	if g.live == 0 {
		return nil
	}
	if pos := *next; pos < g.n && !g.removed(pos) {
		if r := g.at(pos); r.code == string(code) {
			*next = pos + 1
			return r
		}
	}
	g.index()
	i, ok := g.probe(maphash.Bytes(g.seed, code), func(r *registration) bool { return r.code == string(code) })
	if !ok {
		return nil
	}
	*next = int(g.table[i])
	return g.at(*next - 1)
}

// add registers code, unless it is registered already: then it returns
// that registration, and added is false.
func (g *registry) add(code string, handler any, opts *Shared) (r *registration, added bool) {
	ordered := g.n == 0 || code > g.last
	if !ordered {
		g.index()
		if i, ok := g.find(code); ok {
			return g.at(int(g.table[i] - 1)), false
		}
	}
	if g.n%regSlab == 0 {
		g.slabs = append(g.slabs, make([]registration, 0, regSlab))
	}
	last := &g.slabs[len(g.slabs)-1]
	*last = append(*last, registration{code: code, handler: handler, opts: opts})
	g.n++
	g.live++
	if ordered {
		g.last = code // filed by index, later
	} else {
		g.file(g.n - 1)
		g.indexed = g.n
	}
	return g.at(g.n - 1), true
}

// index files in the table the registrations add left out.
func (g *registry) index() {
	if g.indexed == g.n {
		return
	}
	if 2*g.live > len(g.table) {
		g.grow()
		return
	}
	for pos := g.indexed; pos < g.n; pos++ {
		if !g.removed(pos) {
			g.file(pos)
		}
	}
	g.indexed = g.n
}

// file puts the registration at pos in the table, growing it as live
// requires (every registration is filed then).
func (g *registry) file(pos int) {
	if 2*g.live > len(g.table) {
		g.grow()
		return
	}
	g.put(pos)
}

// put files the registration at pos in the first empty slot from its
// code's home on; the table has room.
func (g *registry) put(pos int) {
	mask := len(g.table) - 1
	i := g.home(g.at(pos).code)
	for g.table[i] != 0 {
		i = (i + 1) & mask
	}
	g.table[i] = uint32(pos + 1) //nolint:gosec // G115: fewer than 2^32 registrations
}

// grow makes a table of at least twice live slots (the first one) and
// files every live registration in it.
func (g *registry) grow() {
	if g.table == nil {
		g.seed = maphash.MakeSeed()
	}
	size := max(16, len(g.table))
	for size < 2*g.live {
		size *= 2
	}
	g.table = make([]uint32, size)
	for pos := range g.n {
		if !g.removed(pos) {
			g.put(pos)
		}
	}
	g.indexed = g.n
}

// remove unregisters r (Register's write failed). Its slab keeps it, for
// the callers that hold it, without its state: the view no longer has it.
func (g *registry) remove(r *registration) {
	if g.live == 0 {
		return
	}
	g.index()
	i, ok := g.find(r.code)
	if !ok || g.at(int(g.table[i]-1)) != r {
		return
	}
	pos := int(g.table[i] - 1)
	for len(g.gone) <= pos/64 {
		g.gone = append(g.gone, 0)
	}
	g.gone[pos/64] |= 1 << (pos % 64)
	g.live--
	r.state = nil
	// Backward-shift deletion: the entries after the hole that probed
	// past it move into it, so that no search stops short of them.
	mask := len(g.table) - 1
	for j := i; ; {
		g.table[i] = 0
		for {
			j = (j + 1) & mask
			if g.table[j] == 0 {
				return
			}
			h := g.home(g.at(int(g.table[j] - 1)).code)
			// The entry at j stays unless the hole i lies on its probe
			// path, cyclically from h to j.
			if i <= j && (h <= i || h > j) || i > j && h <= i && h > j {
				break
			}
		}
		g.table[i] = g.table[j]
		i = j
	}
}

func (g *registry) removed(pos int) bool {
	return pos/64 < len(g.gone) && g.gone[pos/64]&(1<<(pos%64)) != 0
}

// all yields the live registrations in the order they were registered.
func (g *registry) all() iter.Seq[*registration] {
	return func(yield func(*registration) bool) {
		for pos := range g.n {
			if !g.removed(pos) && !yield(g.at(pos)) {
				return
			}
		}
	}
}
