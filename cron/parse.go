package cron

import (
	"fmt"
	"strconv"
	"strings"
)

// The field grammar is our own rather than robfig/cron's parser: robfig has no
// L, W, # or year, numbers Quartz's days of the week differently, reports
// errors without naming the field, and panics on some inputs. Its cron.Schedule
// interface is kept (see Schedule), and its parser serves as a test oracle for
// the specs both accept (schedule_test.go).

// fieldKind indexes the seven fields in the order a 7-field spec has them.
type fieldKind int

const (
	fSecond fieldKind = iota
	fMinute
	fHour
	fDom
	fMonth
	fDow
	fYear
)

var fieldNames = [...]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week", "year"}

func (k fieldKind) String() string { return fieldNames[k] }

// field is one parsed field, kept for String and Describe.
type field struct {
	text  string // upper-cased as written; "" when absent (year)
	elems []elem
}

// any reports whether the field restricts nothing ("*", "?", "*/1").
func (f field) any() bool {
	return len(f.elems) == 1 && (f.elems[0].kind == eAny || f.elems[0].kind == eAll && f.elems[0].step == 1)
}

type elemKind uint8

const (
	eAny     elemKind = iota // ?
	eAll                     // * or */step (Quartz also /step)
	eRange                   // a, a-b, a/step, a-b/step; lo > hi wraps (Quartz only)
	eLast                    // L, L-n: n days before the last day of the month
	eLastW                   // LW, L-nW: the weekday nearest to it
	eNearW                   // nW: the weekday nearest to day n
	eLastDow                 // wL: the last weekday w of the month
	eNthDow                  // w#n: the n-th weekday w of the month
)

type elem struct {
	kind   elemKind
	lo, hi int // values as written in the field's own numbering
	step   int
	n      int // offset for eLast/eLastW, day for eNearW, k for eNthDow
}

// fieldBounds are the values a field accepts, as written.
func fieldBounds(k fieldKind, d Dialect) (lo, hi int) {
	switch k {
	case fSecond, fMinute:
		return 0, 59
	case fHour:
		return 0, 23
	case fDom:
		return 1, 31
	case fMonth:
		return 1, 12
	case fDow:
		if d == DialectQuartz {
			return 1, 7
		}
		return 0, 7
	}
	return 1970, MaxYear
}

// maxStep follows Quartz's increment limits, in both dialects.
var maxStep = [...]int{59, 59, 23, 31, 12, 7, MaxYear - 1970}

var monthNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}
var dayNames = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

func parseFields(body string, cfg config) (*cronSchedule, error) {
	var buf [7]elem // one item a field, the common case, with no allocation
	fields, parts, err := splitFields(body, cfg.dialect, buf[:0])
	if err != nil {
		return nil, err
	}
	s := &cronSchedule{dialect: cfg.dialect, loc: cfg.loc}
	for k, f := range fields {
		if f.text != "" {
			s.apply(fieldKind(k), f)
		}
	}
	s.domAny, s.dowAny = fields[fDom].any(), fields[fDow].any()
	if cfg.dialect == DialectQuartz {
		domNone, dowNone := fields[fDom].text == "?", fields[fDow].text == "?"
		switch {
		case domNone && dowNone:
			return nil, &SpecError{Reason: `quartz: day-of-month and day-of-week are both "?"; one must be set`}
		case !domNone && !dowNone:
			return nil, &SpecError{Reason: `quartz: day-of-month and day-of-week both set; one must be "?"`}
		}
	}
	wild := func(t string) bool { return t[0] == '*' || t[0] == '/' }
	s.fixedTime = !wild(fields[fMinute].text) && !wild(fields[fHour].text)
	s.spec = normalSpec(body, parts)
	return s, nil
}

// normalSpec is the spec of body, whose fields are parts: the fields
// upper-cased, one space apart. A body written so already is its own
// (most are: "0 30 14 * * *"), without building it again.
func normalSpec(body string, parts []string) string {
	written := len(parts) - 1 // the separators, if each is one space
	for _, p := range parts {
		written += len(p)
	}
	if len(body) == written && strings.Count(body, " ") == len(parts)-1 && strings.ToUpper(body) == body {
		return body
	}
	norm := make([]string, len(parts))
	for i, p := range parts {
		norm[i] = strings.ToUpper(p)
	}
	return strings.Join(norm, " ")
}

// splitFields parses each field of a field spec: the seven fields (text
// "" for an absent year, "0" for the second of a 5-field spec), and the
// fields as written. The fields' items are appended to buf, which the
// caller may give room on its stack.
func splitFields(body string, d Dialect, buf []elem) (fields [7]field, parts []string, err error) {
	var texts [7]string
	parts = strings.Fields(body)
	switch {
	case d == DialectQuartz && (len(parts) == 6 || len(parts) == 7):
		copy(texts[:], parts)
	case d == DialectQuartz:
		return fields, nil, &SpecError{Reason: fmt.Sprintf("quartz: %d fields; want 6 (second minute hour day-of-month month day-of-week) or 7 (and year)", len(parts))}
	case len(parts) == 5:
		texts[fSecond] = "0"
		copy(texts[fMinute:], parts)
	case len(parts) == 6:
		copy(texts[:], parts)
	default:
		return fields, nil, &SpecError{Reason: fmt.Sprintf("%d fields; want 5 (minute hour day-of-month month day-of-week) or 6 (second first); a year field needs the Quartz dialect", len(parts))}
	}
	for i, text := range texts {
		if text == "" {
			continue
		}
		if fields[i], buf, err = parseField(fieldKind(i), text, d, buf); err != nil {
			return fields, nil, err
		}
	}
	return fields, parts, nil
}

// parsedFields are s's fields as parsed, for Describe: parsed again from
// its spec rather than kept, since a schedule is read far more often
// than described, and a replica holds one per distinct spec (a hundred
// thousand, for tasks that each fire at their own time). The spec parsed
// once, so it parses again.
func (s *cronSchedule) parsedFields() ([7]field, error) {
	body := s.spec
	if fields, ok := descriptors[body]; ok {
		body = fields
	}
	fields, _, err := splitFields(body, s.dialect, nil)
	return fields, err
}

func parseField(k fieldKind, text string, d Dialect, buf []elem) (field, []elem, error) {
	up := strings.ToUpper(text)
	bad := func(reason string, args ...any) (field, []elem, error) {
		return field{}, buf, &SpecError{Field: k.String(), Value: text, Reason: fmt.Sprintf(reason, args...)}
	}
	list := strings.Contains(up, ",")
	if d == DialectQuartz && list {
		// Quartz 2.3 refuses these in lists, or reads them in ways nobody means.
		if k == fDom && strings.ContainsAny(up, "LW") {
			return bad("quartz: L and W cannot be combined with other days in a list")
		}
		if k == fDow && strings.ContainsAny(up, "L#") {
			return bad("quartz: L and # cannot be combined with other days in a list")
		}
	}
	f := field{text: up}
	from := len(buf)
	for rest, more := up, true; more; {
		var tok string
		tok, rest, more = strings.Cut(rest, ",")
		if tok == "" {
			return bad("empty item in list")
		}
		if tok == "?" && list {
			return bad(`"?" must stand alone`)
		}
		e, reason := parseElem(k, tok, d)
		if reason != "" {
			if list {
				return bad("%q: %s", tok, reason)
			}
			return bad("%s", reason)
		}
		buf = append(buf, e)
	}
	f.elems = buf[from:len(buf):len(buf)] // the next field's items go after, not over, these
	return f, buf, nil
}

// parseElem reads one list item. It returns a reason instead of an error so
// parseField can name the field and the item.
func parseElem(k fieldKind, tok string, d Dialect) (elem, string) {
	q := d == DialectQuartz
	if tok == "?" {
		if k != fDom && k != fDow {
			return elem{}, `"?" is only allowed in day-of-month and day-of-week`
		}
		return elem{kind: eAny, step: 1}, ""
	}
	if strings.Contains(tok, "?") {
		return elem{}, `"?" must stand alone`
	}
	switch {
	case k == fDom && strings.HasPrefix(tok, "L"):
		return parseLast(tok)
	case k == fDom && strings.HasSuffix(tok, "W"):
		day, err := strconv.Atoi(tok[:len(tok)-1])
		if err != nil || day < 1 || day > 31 {
			return elem{}, "W needs a single day 1-31 before it, e.g. 15W"
		}
		return elem{kind: eNearW, n: day}, ""
	case k == fDow && q && tok == "L":
		return elem{kind: eRange, lo: 7, hi: 7, step: 1}, "" // Quartz: L alone is Saturday
	case k == fDow && tok == "L":
		return elem{}, `"L" needs a day before it, e.g. 5L or FRIL (last Friday of the month)`
	case k == fDow && strings.Contains(tok, "#"):
		day, nth, _ := strings.Cut(tok, "#")
		w, reason := parseValue(k, day, d)
		if reason != "" {
			return elem{}, reason
		}
		n, err := strconv.Atoi(nth)
		if err != nil || n < 1 || n > 5 {
			return elem{}, fmt.Sprintf("%q after # must be a number 1-5", nth)
		}
		return elem{kind: eNthDow, lo: w, hi: w, n: n}, ""
	case k == fDow && strings.HasSuffix(tok, "L"):
		w, reason := parseValue(k, tok[:len(tok)-1], d)
		if reason != "" {
			return elem{}, reason
		}
		return elem{kind: eLastDow, lo: w, hi: w}, ""
	}
	min, max := fieldBounds(k, d)
	if k == fDow && !q {
		max = 6 // 7 is Sunday only when written: "*" and "1/2" end on Saturday, as in robfig/cron
	}
	base, stepText, hasStep := strings.Cut(tok, "/")
	e := elem{kind: eRange, step: 1}
	if hasStep {
		step, err := strconv.Atoi(stepText)
		if err != nil || len(stepText) > 4 {
			return elem{}, fmt.Sprintf("step %q is not a number", stepText)
		}
		if step < 1 || step > maxStep[k] {
			return elem{}, fmt.Sprintf("step %d out of range 1-%d", step, maxStep[k])
		}
		e.step = step
	}
	switch {
	case base == "*" || base == "" && hasStep && q:
		e.kind, e.lo, e.hi = eAll, min, max
		return e, ""
	case base == "":
		return elem{}, "missing value"
	}
	if q && hasStep && strings.ContainsAny(base, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		// Quartz 2.3 silently drops a step after a name (JAN/3 is January only).
		return elem{}, "quartz: a step after a name is ignored by Quartz; write numbers, e.g. 1/3"
	}
	a, b, isRange := strings.Cut(base, "-")
	var reason string
	if e.lo, reason = parseValue(k, a, d); reason != "" {
		return elem{}, reason
	}
	switch {
	case isRange:
		if e.hi, reason = parseValue(k, b, d); reason != "" {
			return elem{}, reason
		}
		if k == fDow && !q && e.hi == 0 && e.lo > 0 {
			e.hi = 7 // MON-SUN, 5-0: Sunday ends the week
		}
		if e.lo > e.hi && (!q || k == fYear) {
			return elem{}, fmt.Sprintf("range start %d is after its end %d", e.lo, e.hi)
		}
	case hasStep:
		e.hi = max // a/step is a-max/step
	default:
		e.hi = e.lo
	}
	return e, ""
}

// parseLast reads L, L-n, LW and L-nW in the day-of-month field.
func parseLast(tok string) (elem, string) {
	rest := tok[1:]
	e := elem{kind: eLast}
	if r, ok := strings.CutSuffix(rest, "W"); ok {
		e.kind, rest = eLastW, r
	}
	if rest == "" {
		return e, ""
	}
	off, ok := strings.CutPrefix(rest, "-")
	n, err := strconv.Atoi(off)
	if !ok || err != nil || len(off) > 2 {
		return elem{}, "want L, L-n, LW or L-nW (n days before the last day of the month)"
	}
	if n > 30 {
		return elem{}, fmt.Sprintf("offset %d from the last day must be 0-30", n)
	}
	e.n = n
	return e, ""
}

// parseValue reads a number or a three-letter name within the field's bounds.
func parseValue(k fieldKind, text string, d Dialect) (int, string) {
	min, max := fieldBounds(k, d)
	if n, ok := monthNames[text]; ok && k == fMonth {
		return n, ""
	}
	if n, ok := dayNames[text]; ok && k == fDow {
		if d == DialectQuartz {
			return n + 1, ""
		}
		return n, ""
	}
	if text == "" {
		return 0, "missing value"
	}
	for _, c := range text {
		if c < '0' || c > '9' {
			if k == fMonth || k == fDow {
				return 0, fmt.Sprintf("%q is not a number or a three-letter name", text)
			}
			return 0, fmt.Sprintf("%q is not a number", text)
		}
	}
	if len(text) > 4 {
		return 0, fmt.Sprintf("value %s out of range %d-%d", text, min, max)
	}
	n, _ := strconv.Atoi(text)
	if n < min || n > max {
		return 0, fmt.Sprintf("value %d out of range %d-%d", n, min, max)
	}
	return n, ""
}

// apply sets the schedule's bits for a parsed field.
func (s *cronSchedule) apply(k fieldKind, f field) {
	q := s.dialect == DialectQuartz
	// bit converts a value as written to its bit: days of the week to
	// Sunday = 0, years to an offset from 1970.
	bit := func(v int) int {
		switch {
		case k == fDow && q:
			return v - 1
		case k == fDow:
			return v % 7
		case k == fYear:
			return v - 1970
		}
		return v
	}
	if k == fYear {
		s.years = new([4]uint64)
	}
	for _, e := range f.elems {
		switch e.kind {
		case eAny:
			if k == fDom {
				s.dom = ^uint64(0)
			} else {
				s.dow = ^uint64(0)
			}
		case eAll, eRange:
			min, max := fieldBounds(k, s.dialect)
			hi := e.hi
			if hi < e.lo { // Quartz wraps: 22-2 is 22,23,0,1,2
				hi += max - min + 1
			}
			for v := e.lo; v <= hi; v += e.step {
				w := v
				if w > max {
					w -= max - min + 1
				}
				b := bit(w)
				switch k {
				case fSecond:
					s.second |= 1 << b
				case fMinute:
					s.minute |= 1 << b
				case fHour:
					s.hour |= 1 << b
				case fDom:
					s.dom |= 1 << b
				case fMonth:
					s.month |= 1 << b
				case fDow:
					s.dow |= 1 << b
				case fYear:
					s.years[b/64] |= 1 << (b % 64)
				}
			}
		case eLast:
			s.domLast |= 1 << e.n
		case eLastW:
			s.domLastW |= 1 << e.n
		case eNearW:
			s.domNearW |= 1 << e.n
		case eLastDow:
			s.dowLast |= 1 << bit(e.lo)
		case eNthDow:
			s.dowNth[bit(e.lo)] |= 1 << e.n
		}
	}
}
