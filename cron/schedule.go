package cron

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// Schedule answers "when is the next fire" for one task. Every replica computes
// the same instants from the same spec: Next is a pure function of its input.
//
// A Schedule is also a robfig/cron/v3 cron.Schedule, so it plugs into code that
// expects one.
type Schedule interface {
	// Next returns the first fire strictly after after, in the schedule's
	// location, with a whole second. It returns the zero time when there is no
	// further fire (a year field that has passed, a date that never exists, or
	// nothing before the end of year 2199, where the search stops as Quartz's
	// does).
	Next(after time.Time) time.Time
	// String returns the normalized spec: fields separated by one space, names
	// upper-cased, descriptors as written, without a time-zone prefix (see
	// Location).
	String() string
	// Describe returns a short English description for people, such as
	// "at 09:00 on Monday through Friday, Asia/Shanghai".
	Describe() string
	// Location returns the time zone the spec is read in.
	Location() *time.Location
	// Dialect returns the dialect the spec was parsed in.
	Dialect() Dialect
}

var (
	_ robfig.Schedule = Schedule(nil)
	_ Schedule        = (*cronSchedule)(nil)
	_ Schedule        = (*everySchedule)(nil)
)

// Dialect names a cron expression language.
type Dialect string

const (
	// DialectCron is the default dialect: 5-field Unix cron or 6 fields with
	// seconds first, day-of-week 0-7 (0 and 7 are Sunday), descriptors such as
	// @daily and @every 30s, and the L, W and # extensions Spring users know.
	DialectCron Dialect = "cron"
	// DialectQuartz is org.quartz.CronExpression 2.3: 6 or 7 fields (seconds
	// first, optional year), day-of-week 1-7 = SUN-SAT, and exactly one of
	// day-of-month and day-of-week must be "?".
	DialectQuartz Dialect = "quartz"
)

// MaxYear is the last year a Schedule looks at: the last year Quartz's year
// field accepts (its search stops earlier, at the current year + 100), and a
// bound that keeps Next fast for specs that rarely or never match.
const MaxYear = 2199

// Option changes how Parse reads a spec.
type Option func(*config) error

type config struct {
	dialect Dialect
	loc     *time.Location
}

// Quartz selects the Quartz dialect (DialectQuartz).
func Quartz() Option {
	return WithDialect(DialectQuartz)
}

// WithDialect selects a dialect by name, for specs whose dialect is stored as
// data (a console edit, a task row). The empty name is the default dialect.
func WithDialect(d Dialect) Option {
	return func(c *config) error {
		switch d {
		case "", DialectCron:
			c.dialect = DialectCron
		case DialectQuartz:
			c.dialect = DialectQuartz
		default:
			return &SpecError{Field: "dialect", Value: string(d), Reason: `unknown dialect; want "cron" or "quartz"`}
		}
		return nil
	}
}

// In sets the time zone the spec is read in. The default is UTC, never the
// machine's local zone: replicas in different zones must agree on every fire.
// A CRON_TZ= or TZ= prefix in the spec wins over In.
func In(loc *time.Location) Option {
	return func(c *config) error {
		if loc == nil {
			return &SpecError{Field: "location", Reason: "time zone is nil"}
		}
		if loc == time.Local {
			return &SpecError{Field: "location", Value: "Local", Reason: localZoneReason}
		}
		c.loc = loc
		return nil
	}
}

const localZoneReason = `the machine's local zone differs between replicas; name a zone such as "Asia/Shanghai"`

// SpecError reports a spec that cannot be parsed. Field names the part at
// fault ("minute", "day-of-week", "time zone", ...), Value is its text.
type SpecError struct {
	Spec   string
	Field  string
	Value  string
	Reason string
}

// Error reads like `xtimer: spec "0 60 * * *": minute field "60": value 60 out of range 0-59`.
func (e *SpecError) Error() string { return "xtimer: " + e.Detail() }

// Detail is the message of Error without its "xtimer: " prefix, for an
// error that names the spec after a prefix of its own (a task's code):
// `spec "0 60 * * *": hour field "60": value 60 out of range 0-23`.
func (e *SpecError) Detail() string {
	var b strings.Builder
	if e.Spec != "" || e.Field == "" {
		fmt.Fprintf(&b, "spec %q: ", e.Spec)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "%s field %q: ", e.Field, e.Value)
	}
	b.WriteString(e.Reason)
	return b.String()
}

// ErrBadSpec is matched by every error Parse and LoadZone return:
// errors.Is(err, cron.ErrBadSpec).
var ErrBadSpec = errors.New("xtimer: bad schedule spec")

// Is makes errors.Is(err, ErrBadSpec) true for a *SpecError.
func (e *SpecError) Is(target error) bool { return target == ErrBadSpec }

// Parse reads a cron spec. See the package doc and docs/cron.md for
// what each dialect accepts; in short:
//
//	0 9 * * MON-FRI             5 fields, Unix cron
//	0 */5 * * * *               6 fields, seconds first
//	@daily, @every 90s          descriptors (default dialect only)
//	CRON_TZ=Asia/Shanghai 0 9 * * *   a zone for this spec
//	0 0 12 ? * 2-6 *            Quartz, with Quartz() (Monday-Friday)
//
// It never panics; every error is a *SpecError naming the field and value.
func Parse(spec string, opts ...Option) (Schedule, error) {
	cfg := config{dialect: DialectCron, loc: time.UTC}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&cfg); err != nil {
			var se *SpecError
			if errors.As(err, &se) {
				se.Spec = spec
			}
			return nil, err
		}
	}
	key := parsedKey{spec, cfg.dialect, cfg.loc.String()}
	parsed.Lock()
	s, ok := parsed.m[key]
	parsed.Unlock()
	if ok {
		return s, nil
	}
	s, err := parse(spec, cfg)
	if err != nil {
		var se *SpecError
		if errors.As(err, &se) && se.Spec == "" {
			se.Spec = spec
		}
		return nil, err
	}
	parsed.Lock()
	if len(parsed.m) >= maxParsed {
		clear(parsed.m)
	}
	parsed.m[key] = s
	parsed.Unlock()
	return s, nil
}

// parsed caches the schedules parsed, by spec, dialect and zone: a
// million tasks share a few schedules, and xtimer parses each at Register
// and again whenever a replica adopts its row. A Schedule never changes once
// parsed, so tasks can share one. At most maxParsed are kept.
var parsed = struct {
	sync.Mutex
	m map[parsedKey]Schedule
}{m: map[parsedKey]Schedule{}}

const maxParsed = 10_000

type parsedKey struct {
	spec    string
	dialect Dialect
	zone    string
}

func parse(spec string, cfg config) (Schedule, error) {
	body := strings.TrimSpace(spec)
	if body == "" {
		return nil, &SpecError{Reason: "empty spec"}
	}
	if strings.HasPrefix(body, "CRON_TZ=") || strings.HasPrefix(body, "TZ=") {
		prefix, rest, _ := strings.Cut(body, " ")
		if i := strings.IndexAny(prefix, "\t"); i >= 0 {
			prefix, rest = prefix[:i], prefix[i+1:]+" "+rest
		}
		_, name, _ := strings.Cut(prefix, "=")
		loc, err := LoadZone(name)
		if err != nil {
			return nil, err
		}
		cfg.loc = loc
		body = strings.TrimSpace(rest)
		if body == "" {
			return nil, &SpecError{Reason: "nothing after the time-zone prefix " + prefix}
		}
	}
	if strings.HasPrefix(body, "@") {
		if cfg.dialect == DialectQuartz {
			return nil, &SpecError{Field: "descriptor", Value: body, Reason: "descriptors are not part of the Quartz dialect"}
		}
		return parseDescriptor(body, cfg)
	}
	return parseFields(body, cfg)
}

// LoadZone loads a zone by its IANA name, as a CRON_TZ= prefix names it,
// and refuses what a prefix refuses: the empty name, Local (see In) and
// names the zone database does not know. Its errors are *SpecError with
// Field "time zone". It is exported for zones kept as data beside a spec
// (a stored task, an HTTP task's Zone), so that they are refused for the
// same reasons and in the same words as a prefix.
func LoadZone(name string) (*time.Location, error) {
	switch {
	case name == "":
		return nil, &SpecError{Field: "time zone", Value: name, Reason: "empty zone name"}
	case name == "Local":
		return nil, &SpecError{Field: "time zone", Value: name, Reason: localZoneReason}
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, &SpecError{Field: "time zone", Value: name, Reason: "unknown zone (want an IANA name such as Europe/London)"}
	}
	return loc, nil
}

var descriptors = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
}

func parseDescriptor(body string, cfg config) (Schedule, error) {
	if rest, ok := strings.CutPrefix(body, "@every"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
		return parseEvery(strings.TrimSpace(rest), cfg)
	}
	fields, ok := descriptors[strings.ToLower(body)]
	if !ok {
		return nil, &SpecError{Field: "descriptor", Value: body, Reason: "unknown descriptor; want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>"}
	}
	s, err := parseFields(fields, cfg)
	if err != nil {
		return nil, err
	}
	s.spec = strings.ToLower(body)
	return s, nil
}

// everySchedule fires every d, at the instants that are whole multiples of d
// since the Unix epoch. Anchoring to the epoch (not to the moment a replica
// started, as robfig/cron's ConstantDelaySchedule does) is what lets every
// replica compute the same instants.
type everySchedule struct {
	every time.Duration
	loc   *time.Location
}

func parseEvery(arg string, cfg config) (Schedule, error) {
	d, err := time.ParseDuration(arg)
	switch {
	case arg == "":
		return nil, &SpecError{Field: "@every", Value: arg, Reason: "missing duration, e.g. @every 30s"}
	case err != nil:
		return nil, &SpecError{Field: "@every", Value: arg, Reason: "not a Go duration such as 30s, 5m or 1h30m"}
	case d < time.Second:
		return nil, &SpecError{Field: "@every", Value: arg, Reason: "duration must be at least 1s"}
	case d%time.Second != 0:
		return nil, &SpecError{Field: "@every", Value: arg, Reason: "duration must be a whole number of seconds"}
	}
	return &everySchedule{every: d, loc: cfg.loc}, nil
}

func (s *everySchedule) Next(after time.Time) time.Time {
	step := int64(s.every / time.Second)
	sec := after.Unix()
	q := sec / step
	if sec%step != 0 && sec < 0 {
		q-- // floor division for instants before 1970
	}
	next := (q + 1) * step
	if time.Unix(next, 0).UTC().Year() > MaxYear {
		return time.Time{}
	}
	return time.Unix(next, 0).In(s.loc)
}

func (s *everySchedule) String() string           { return "@every " + s.every.String() }
func (s *everySchedule) Location() *time.Location { return s.loc }
func (s *everySchedule) Dialect() Dialect         { return DialectCron }
func (s *everySchedule) Describe() string {
	return "every " + s.every.String() + " (counted from 1970-01-01 00:00 UTC), " + s.loc.String()
}

// NextFires returns up to n fire times of sched after after, stopping
// before endAt when it is not zero. xtimer's NextRuns and its admin console
// list fires through it.
func NextFires(sched Schedule, after time.Time, n int, endAt time.Time) []time.Time {
	out := make([]time.Time, 0, n)
	for at := after; len(out) < n; {
		if at = sched.Next(at); at.IsZero() || !endAt.IsZero() && !at.Before(endAt) {
			break
		}
		out = append(out, at)
	}
	return out
}
