package timeline

import (
	"time"

	"github.com/degraded/degraded/levels"
)

// bandKey is what a band holds constant.
type bandKey struct {
	level   string
	index   int
	source  string
	partial levels.Partial
	hasPart bool
}

func keyOf(l *levels.Line, index int) bandKey {
	k := bandKey{level: l.Published, index: index, source: l.Source}
	if l.Partial != nil {
		k.partial, k.hasPart = *l.Partial, true
	}
	return k
}

// severer reports whether a sheds more than b: a higher level, or at the
// same level a smaller admitted share of the band (none, without a
// partial admission, is the smallest).
func (a bandKey) severer(b bandKey) bool {
	if a.index != b.index {
		return a.index > b.index
	}
	share := func(k bandKey) float64 {
		if !k.hasPart {
			return 0
		}
		return k.partial.Fraction
	}
	return share(a) < share(b)
}

// openBand is the band being built. Its shown state is worst; last is the
// state of the latest line, since lastAt.
type openBand struct {
	from   time.Time
	worst  bandKey
	mixed  bool
	last   bandKey
	lastAt time.Time
}

// addBand takes a line's published state. A change ends the open band
// when that band has lasted a bucket; a shorter one absorbs the change
// (mixed) and, once it has lasted a bucket, ends where the state last
// changed. So a band is at least a bucket long, but for a mixed one and
// the one after it, and the bands stay within twice the buckets however
// often the state changes. A start line after a gap (the daemon was
// down) ends the band at the line before it.
func (b *Builder) addBand(l *levels.Line) {
	k := keyOf(l, b.indexOf(l.Published))
	o := b.band
	switch {
	case o == nil:
	case l.Trigger == levels.TriggerStart:
		b.closeBand(b.lastAt)
		o = nil
	case k != o.last:
		if l.At.Sub(o.from) >= b.width {
			b.closeBand(l.At)
			o = nil
			break
		}
		if k.severer(o.worst) {
			o.worst = k
		}
		o.mixed = true
		o.last, o.lastAt = k, l.At
	case o.mixed && l.At.Sub(o.from) >= b.width && o.lastAt.After(o.from):
		b.closeBand(o.lastAt)
		b.band = &openBand{from: o.lastAt, worst: o.last, last: o.last, lastAt: o.lastAt}
		return
	}
	if o == nil {
		b.band = &openBand{from: l.At, worst: k, last: k, lastAt: l.At}
	}
}

// closeBand ends the open band at `at`.
func (b *Builder) closeBand(at time.Time) {
	o := b.band
	if o == nil {
		return
	}
	b.band = nil
	if at.Before(o.from) {
		at = o.from
	}
	band := Band{From: o.from.UTC(), To: at.UTC(), Level: o.worst.level, Index: o.worst.index, Source: o.worst.source, Mixed: o.mixed}
	if o.worst.hasPart {
		p := o.worst.partial
		band.Partial = &p
	}
	b.s.Bands = append(b.s.Bands, band)
}

// indexOf is the level's index in the table in force; -1 when it is not
// in it (or no table is known).
func (b *Builder) indexOf(name string) int {
	if b.table == nil {
		return -1
	}
	for i, lv := range b.table.Levels {
		if lv.Name == name {
			return i
		}
	}
	return -1
}
