package cron

import (
	"fmt"
	"strconv"
	"strings"
)

// Describe builds the English line the console shows beside a spec. It aims
// at letting a person spot a wrong expression ("at 12:00 on Tuesday through
// Saturday" when they meant weekdays), not at elegant prose.
func (s *cronSchedule) Describe() string {
	fields, err := s.parsedFields()
	if err != nil {
		return s.spec + ", " + s.loc.String()
	}
	return (&description{s, fields}).describe()
}

// description is a schedule with its fields as parsed, which Describe
// reads.
type description struct {
	*cronSchedule
	fields [7]field // fields[year] empty when absent
}

func (s *description) describe() string {
	parts := []string{s.describeTime()}
	if d := s.describeDays(); d != "" {
		parts = append(parts, d)
	}
	if m := s.describeField(fMonth, "month"); m != "" {
		parts = append(parts, m)
	}
	if y := s.describeField(fYear, "year"); y != "" {
		parts = append(parts, y)
	}
	return strings.Join(parts, " ") + ", " + s.loc.String()
}

// single returns the field's value when it is one plain number.
func (s *description) single(k fieldKind) (int, bool) {
	f := s.fields[k]
	if len(f.elems) == 1 && f.elems[0].kind == eRange && f.elems[0].lo == f.elems[0].hi {
		return f.elems[0].lo, true
	}
	return 0, false
}

func (s *description) describeTime() string {
	sec, secOne := s.single(fSecond)
	min, minOne := s.single(fMinute)
	hour, hourOne := s.single(fHour)
	if secOne && minOne && hourOne {
		if sec == 0 {
			return fmt.Sprintf("at %02d:%02d", hour, min)
		}
		return fmt.Sprintf("at %02d:%02d:%02d", hour, min, sec)
	}
	var parts []string
	switch {
	case secOne && sec == 0:
	case s.fields[fSecond].any():
		parts = append(parts, "every second")
	default:
		parts = append(parts, s.unitPhrase(fSecond, "second"))
	}
	switch {
	case minOne && hourOne:
		parts = append(parts, fmt.Sprintf("during %02d:%02d", hour, min))
		return strings.Join(parts, " ")
	case minOne && (secOne && sec == 0 || len(parts) > 0):
		if s.fields[fHour].any() {
			parts = append(parts, fmt.Sprintf("at minute %d of every hour", min))
			return strings.Join(parts, " ")
		}
		parts = append(parts, fmt.Sprintf("at minute %d", min))
	case s.fields[fMinute].any() && len(parts) == 0:
		parts = append(parts, "every minute")
	case !s.fields[fMinute].any():
		parts = append(parts, s.unitPhrase(fMinute, "minute"))
	}
	if !s.fields[fHour].any() {
		parts = append(parts, s.unitPhrase(fHour, "hour"))
	}
	return strings.Join(parts, " ")
}

// unitPhrase describes a time-of-day field: "every 15 minutes",
// "at minutes 0, 30", "every minute from 9 through 17".
func (s *description) unitPhrase(k fieldKind, unit string) string {
	f := s.fields[k]
	min, max := fieldBounds(k, s.dialect)
	if len(f.elems) == 1 {
		e := f.elems[0]
		full := e.lo == min && e.hi == max
		switch {
		case e.kind == eAll && e.step > 1, full && e.step > 1:
			return fmt.Sprintf("every %d %ss", e.step, unit)
		case e.lo != e.hi && e.step == 1:
			return fmt.Sprintf("every %s from %d through %d", unit, e.lo, e.hi)
		case e.lo != e.hi:
			return fmt.Sprintf("every %d %ss from %d through %d", e.step, unit, e.lo, e.hi)
		}
	}
	return fmt.Sprintf("at %s %s", plural(unit, len(f.elems) > 1 || f.elems[0].lo != f.elems[0].hi), s.listPhrase(k))
}

func plural(unit string, many bool) string {
	if many {
		return unit + "s"
	}
	return unit
}

var dayWords = [...]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
var monthWords = [...]string{"", "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
var ordinals = [...]string{"", "first", "second", "third", "fourth", "fifth"}

// valueWord prints a value as written in the field's own numbering.
func (s *description) valueWord(k fieldKind, v int) string {
	switch k {
	case fDow:
		if s.dialect == DialectQuartz {
			return dayWords[v-1]
		}
		return dayWords[v%7]
	case fMonth:
		return monthWords[v]
	}
	return strconv.Itoa(v)
}

// listPhrase describes plain values, ranges and steps of a field joined by
// commas: "Monday through Friday", "1, 15", "every 2nd from 1 through 31".
func (s *description) listPhrase(k fieldKind) string {
	f := s.fields[k]
	var items []string
	for _, e := range f.elems {
		switch {
		case e.kind == eLast && e.n == 0:
			items = append(items, "the last day of the month")
		case e.kind == eLast:
			items = append(items, fmt.Sprintf("%d days before the last day of the month", e.n))
		case e.kind == eLastW && e.n == 0:
			items = append(items, "the last weekday of the month")
		case e.kind == eLastW:
			items = append(items, fmt.Sprintf("the weekday nearest %d days before the last day of the month", e.n))
		case e.kind == eNearW:
			items = append(items, fmt.Sprintf("the weekday nearest day %d of the month", e.n))
		case e.kind == eLastDow:
			items = append(items, "the last "+s.valueWord(k, e.lo)+" of the month")
		case e.kind == eNthDow:
			items = append(items, "the "+ordinals[e.n]+" "+s.valueWord(k, e.lo)+" of the month")
		case e.lo == e.hi:
			items = append(items, s.valueWord(k, e.lo))
		case e.step == 1:
			items = append(items, s.valueWord(k, e.lo)+" through "+s.valueWord(k, e.hi))
		default:
			items = append(items, fmt.Sprintf("every %s from %s through %s", ordinal(e.step), s.valueWord(k, e.lo), s.valueWord(k, e.hi)))
		}
	}
	return strings.Join(items, ", ")
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

func (s *description) describeDays() string {
	var dom, dow string
	if !s.domAny {
		dom = "on " + s.listPhrase(fDom)
		if e := s.fields[fDom].elems[0]; len(s.fields[fDom].elems) > 1 || e.kind == eRange {
			dom = "on day " + s.listPhrase(fDom) + " of the month"
		}
	}
	if !s.dowAny {
		dow = "on " + s.listPhrase(fDow)
	}
	switch {
	case dom != "" && dow != "":
		return dom + " or " + dow
	case dom != "":
		return dom
	}
	return dow
}

// describeField describes month and year: "in January, July", "every 3rd month".
func (s *description) describeField(k fieldKind, unit string) string {
	f := s.fields[k]
	if f.text == "" || f.any() {
		return ""
	}
	if len(f.elems) == 1 && f.elems[0].kind == eAll {
		return fmt.Sprintf("every %s %s", ordinal(f.elems[0].step), unit)
	}
	return "in " + s.listPhrase(k)
}
