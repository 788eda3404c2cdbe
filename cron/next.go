package cron

import (
	"math/bits"
	"time"
)

// cronSchedule is a parsed field spec: one bit set per allowed value, plus the
// day rules that depend on the month (L, W, #).
type cronSchedule struct {
	spec    string
	dialect Dialect
	loc     *time.Location

	second, minute, hour uint64 // bit n: value n allowed
	month                uint64 // bits 1-12

	dom      uint64 // bits 1-31: plain days
	domLast  uint64 // bit n: the day n days before the last day (L, L-n)
	domLastW uint64 // bit n: the weekday nearest to the day n days before the last (LW, L-nW)
	domNearW uint64 // bit n: the weekday nearest to day n (nW)

	dow     uint64   // bits 0-6, Sunday = 0
	dowLast uint64   // bit w: the last weekday w of the month (nL)
	dowNth  [7]uint8 // [w] bit k: the k-th weekday w of the month (w#k)

	years *[4]uint64 // bit y-1970; nil: every year

	domAny, dowAny bool // field is "*" or "?": it restricts nothing
	// fixedTime: neither the minute nor the hour field starts with a wildcard.
	// Such fires keep their wall time across daylight-saving changes (cronie's
	// rule); the others follow elapsed time. See Next.
	fixedTime bool
}

func (s *cronSchedule) String() string           { return s.spec }
func (s *cronSchedule) Location() *time.Location { return s.loc }
func (s *cronSchedule) Dialect() Dialect         { return s.dialect }

// Next returns the first fire strictly after after.
//
// The zone's offset is constant between two transitions, so within one such
// segment wall time and instants move together and the search runs on wall
// time alone (nextWall). Where segments meet, the daylight-saving rule of
// the package doc applies:
//
//   - spring forward (a gap of wall times that do not exist): a fixed-time
//     fire in the gap runs once, at the first instant after the gap; a
//     wildcard spec has nothing there.
//   - fall back (wall times that happen twice): a fixed-time fire runs at the
//     first occurrence only; a wildcard spec fires at both.
func (s *cronSchedule) Next(after time.Time) time.Time {
	from := after.Unix() + 1 // first candidate instant; fires are on whole seconds
	var cacheFrom, cacheMatch int64
	haveCache := false
	// Each turn either returns or crosses one zone transition; a zone has at
	// most a few per year, so this bounds the work up to MaxYear generously.
	for range 4 * (MaxYear - 1970 + 2) {
		at := time.Unix(from, 0).In(s.loc)
		_, off := at.Zone()
		start, end := zoneBounds(at)
		offset := int64(off)
		wallFrom := from + offset
		if s.fixedTime && !start.IsZero() {
			_, prevOff := start.Add(-time.Second).Zone()
			// Wall times repeated after a fall back belong to the first occurrence.
			if repeatEnd := start.Unix() + int64(prevOff); int64(prevOff) > offset && wallFrom < repeatEnd {
				wallFrom = repeatEnd
			}
			// The first candidate is the very instant a spring forward ends:
			// a fire whose wall time is in the gap runs now, at the first
			// instant after the gap (the segment before was never searched).
			if gapStart := start.Unix() + int64(prevOff); int64(prevOff) < offset && from == start.Unix() {
				if match, ok := s.nextWall(gapStart); ok && match < wallFrom {
					return start.In(s.loc)
				}
			}
		}
		var match int64
		if haveCache && wallFrom >= cacheFrom && wallFrom <= cacheMatch {
			match = cacheMatch // nothing matches in [cacheFrom, cacheMatch)
		} else {
			var ok bool
			if match, ok = s.nextWall(wallFrom); !ok {
				return time.Time{}
			}
			cacheFrom, cacheMatch, haveCache = wallFrom, match, true
		}
		instant := match - offset
		if end.IsZero() || instant < end.Unix() {
			return time.Unix(instant, 0).In(s.loc)
		}
		_, nextOff := end.Zone()
		if s.fixedTime && int64(nextOff) > offset && match < end.Unix()+int64(nextOff) {
			return end // the match's wall time is in the spring-forward gap
		}
		from = end.Unix()
	}
	return time.Time{}
}

// zoneBounds is time.Time.ZoneBounds with a guard: for instants past a
// zone's last listed transition (2037 in today's zone files) Go can return
// an end that is not after the instant (golang/go#81583: on 31 December of
// leap years). Then the end is found by probing forward and bisecting.
func zoneBounds(at time.Time) (start, end time.Time) {
	start, end = at.ZoneBounds()
	if start.After(at) {
		start = time.Time{}
	}
	if end.IsZero() || end.After(at) {
		return start, end
	}
	_, off := at.Zone()
	lo := at
	for range 400 { // zones change offset at least once a year or never
		hi := lo.Add(24 * time.Hour)
		if _, o := hi.Zone(); o != off {
			for hi.Sub(lo) > time.Second {
				mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
				if _, o := mid.Zone(); o == off {
					lo = mid
				} else {
					hi = mid
				}
			}
			return start, hi
		}
		lo = hi
	}
	return start, time.Time{}
}

// nextWall returns the first wall time (seconds, read as if UTC) at or after
// from that matches every field, or false when none does up to MaxYear.
func (s *cronSchedule) nextWall(from int64) (int64, bool) {
	y, mo, d, h, mi, sec := civilFromWall(from)
	cachedY, cachedMo, days := 0, 0, uint64(0)
	for y <= MaxYear {
		if s.years != nil && !yearSet(s.years, y) {
			ny, ok := nextYear(s.years, y)
			if !ok {
				return 0, false
			}
			y, mo, d, h, mi, sec = ny, 1, 1, 0, 0, 0
		}
		m := nextBit(s.month, mo)
		if m < 0 {
			y, mo, d, h, mi, sec = y+1, 1, 1, 0, 0, 0
			continue
		}
		if m != mo {
			mo, d, h, mi, sec = m, 1, 0, 0, 0
		}
		if y != cachedY || mo != cachedMo {
			cachedY, cachedMo, days = y, mo, s.dayMask(y, mo)
		}
		dd := nextBit(days, d)
		if dd < 0 {
			mo, d, h, mi, sec = mo+1, 1, 0, 0, 0
			if mo > 12 {
				y, mo = y+1, 1
			}
			continue
		}
		if dd != d {
			d, h, mi, sec = dd, 0, 0, 0
		}
		hh, mm, ss, ok := s.nextTimeOfDay(h, mi, sec)
		if !ok {
			d, h, mi, sec = d+1, 0, 0, 0
			continue
		}
		return wallFromCivil(y, mo, d, hh, mm, ss), true
	}
	return 0, false
}

// nextTimeOfDay returns the first allowed time of day at or after h:m:s.
func (s *cronSchedule) nextTimeOfDay(h, m, sec int) (int, int, int, bool) {
	for {
		hh := nextBit(s.hour, h)
		if hh < 0 || hh > 23 {
			return 0, 0, 0, false
		}
		if hh != h {
			h, m, sec = hh, 0, 0
		}
		mm := nextBit(s.minute, m)
		if mm < 0 {
			h, m, sec = h+1, 0, 0
			continue
		}
		if mm != m {
			m, sec = mm, 0
		}
		ss := nextBit(s.second, sec)
		if ss < 0 {
			m, sec = m+1, 0
			continue
		}
		return h, m, ss, true
	}
}

// dayMask returns the days of month mo of year y that match (bit d: day d).
// A field that is "*" or "?" restricts nothing; when both day fields
// restrict, a day matches if either matches (the Vixie rule; Quartz never
// has both).
func (s *cronSchedule) dayMask(y, mo int) uint64 {
	n := daysIn(y, mo)
	all := (uint64(1)<<(n+1) - 1) &^ 1
	if s.domAny && s.dowAny {
		return all
	}
	var byDom, byDow uint64
	if !s.domAny {
		byDom = s.dom & all
		first := weekday(y, mo, 1)
		for o := s.domLast; o != 0; o &= o - 1 {
			if d := n - bits.TrailingZeros64(o); d >= 1 {
				byDom |= 1 << d
			}
		}
		for o := s.domLastW; o != 0; o &= o - 1 {
			if d := n - bits.TrailingZeros64(o); d >= 1 {
				byDom |= 1 << nearestWeekday(d, n, first)
			}
		}
		for w := s.domNearW; w != 0; w &= w - 1 {
			if d := bits.TrailingZeros64(w); d <= n {
				byDom |= 1 << nearestWeekday(d, n, first)
			}
		}
	}
	if !s.dowAny {
		first := weekday(y, mo, 1)
		last := (first + n - 1) % 7
		for wd := range 7 {
			firstDay := 1 + (wd-first+7)%7
			if s.dow&(1<<wd) != 0 {
				for d := firstDay; d <= n; d += 7 {
					byDow |= 1 << d
				}
			}
			if s.dowLast&(1<<wd) != 0 {
				byDow |= 1 << (n - (last-wd+7)%7)
			}
			for k := s.dowNth[wd]; k != 0; k &= k - 1 {
				if d := firstDay + 7*(bits.TrailingZeros8(k)-1); d <= n {
					byDow |= 1 << d
				}
			}
		}
	}
	switch {
	case s.domAny:
		return byDow
	case s.dowAny:
		return byDom
	default:
		return byDom | byDow
	}
}

// nearestWeekday moves day d of a month of n days, whose first day falls on
// weekday first, to the nearest Monday-Friday without leaving the month (the
// W rule of Quartz): Saturday the 1st moves to Monday the 3rd, Sunday the
// last to Friday.
func nearestWeekday(d, n, first int) int {
	switch (first + d - 1) % 7 {
	case 6: // Saturday
		if d == 1 {
			return 3
		}
		return d - 1
	case 0: // Sunday
		if d == n {
			return d - 2
		}
		return d + 1
	}
	return d
}

// nextBit returns the lowest set bit of mask at or above from, or -1.
func nextBit(mask uint64, from int) int {
	if from >= 64 {
		return -1
	}
	if m := mask >> from << from; m != 0 {
		return bits.TrailingZeros64(m)
	}
	return -1
}

func yearSet(years *[4]uint64, y int) bool {
	i := y - 1970
	return i >= 0 && i < 256 && years[i/64]&(1<<(i%64)) != 0
}

func nextYear(years *[4]uint64, y int) (int, bool) {
	for i := max(y-1970, 0); i <= MaxYear-1970; i++ {
		if years[i/64]&(1<<(i%64)) != 0 {
			return 1970 + i, true
		}
	}
	return 0, false
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// weekday returns the weekday of a date, Sunday = 0 (proleptic Gregorian).
func weekday(y, m, d int) int {
	return int(floorMod(daysFromCivil(y, m, d)+4, 7)) // 1970-01-01 was a Thursday
}

// daysFromCivil and civilFromDays convert between dates and days since
// 1970-01-01 without time.Time, so Next does not allocate or normalize
// (Howard Hinnant's algorithms).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(int64(y), 400)
	yoe := int64(y) - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func civilFromDays(z int64) (y, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	y = int(yoe + era*400)
	if m <= 2 {
		y++
	}
	return y, m, d
}

func civilFromWall(w int64) (y, mo, d, h, mi, s int) {
	days := floorDiv(w, 86400)
	rem := int(w - days*86400)
	y, mo, d = civilFromDays(days)
	return y, mo, d, rem / 3600, rem / 60 % 60, rem % 60
}

func wallFromCivil(y, mo, d, h, mi, s int) int64 {
	return daysFromCivil(y, mo, d)*86400 + int64(h*3600+mi*60+s)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
