package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// How the pages show time. The JSON API speaks UTC (RFC 3339); a person
// reads times in a display zone they pick with the selector in the page
// header. The choice is a view preference, not state: it lives in the
// xtimer_zone cookie, set by a plain GET form (so it works without
// JavaScript) and read back on every page. A zone that time.LoadLocation
// does not know falls back to UTC with a notice on every page until it is
// changed, never silently. The header always says which zone is in force,
// and every run time also carries, on hover, the same instant in the
// task's own zone, which is the one its cron expression is read in. The
// schedule form turns this round: while someone writes an expression, its
// fires read in the expression's zone first, the display zone beside.

// zoneCookie holds the viewer's display zone, query-escaped.
const zoneCookie = "xtimer_zone"

// maxZoneName bounds a zone name, as the store bounds a task's time_zone.
const maxZoneName = 64

// zoneCookieAge is how long the choice is kept: 400 days, the longest a
// browser keeps a cookie.
const zoneCookieAge = 400 * 24 * 60 * 60

// commonZones are offered by the zone selectors; a zone not listed (the
// viewer's current one, a task's) is added to the list where it is shown.
var commonZones = []string{
	"UTC",
	"America/Los_Angeles", "America/Denver", "America/Phoenix", "America/Chicago", "America/New_York",
	"America/Halifax", "America/Anchorage", "Pacific/Honolulu", "America/Mexico_City", "America/Bogota",
	"America/Lima", "America/Santiago", "America/Sao_Paulo", "America/Argentina/Buenos_Aires", "America/Toronto",
	"America/Vancouver",
	"Europe/London", "Europe/Dublin", "Europe/Lisbon", "Europe/Madrid", "Europe/Paris", "Europe/Brussels",
	"Europe/Amsterdam", "Europe/Berlin", "Europe/Zurich", "Europe/Rome", "Europe/Stockholm", "Europe/Oslo",
	"Europe/Copenhagen", "Europe/Warsaw", "Europe/Prague", "Europe/Vienna", "Europe/Athens", "Europe/Helsinki",
	"Europe/Kyiv", "Europe/Istanbul", "Europe/Moscow",
	"Africa/Casablanca", "Africa/Lagos", "Africa/Cairo", "Africa/Johannesburg", "Africa/Nairobi",
	"Asia/Dubai", "Asia/Tehran", "Asia/Karachi", "Asia/Kolkata", "Asia/Kathmandu", "Asia/Dhaka",
	"Asia/Bangkok", "Asia/Jakarta", "Asia/Ho_Chi_Minh", "Asia/Shanghai", "Asia/Hong_Kong", "Asia/Taipei",
	"Asia/Singapore", "Asia/Manila", "Asia/Seoul", "Asia/Tokyo",
	"Australia/Perth", "Australia/Adelaide", "Australia/Brisbane", "Australia/Sydney", "Australia/Melbourne",
	"Pacific/Auckland",
}

// zonesWith returns commonZones with the given zones added when missing,
// so that a selector always holds the value it preselects.
func zonesWith(extra ...string) []string {
	out := slices.Clone(commonZones)
	for _, z := range extra {
		if z != "" && !slices.Contains(out, z) {
			out = append(out, z)
		}
	}
	return out
}

// displayZone is the zone the pages show times in.
type displayZone struct {
	Name string
	Loc  *time.Location
	// Notice says why the viewer's choice is not in force; empty when it
	// is (or when there is none and UTC is the default).
	Notice string
}

var utcZone = displayZone{Name: "UTC", Loc: time.UTC}

// zoneOf reads the display zone from the request's cookie: UTC when there
// is none, UTC with a notice when it names no zone.
func zoneOf(r *http.Request) displayZone {
	ck, err := r.Cookie(zoneCookie)
	if err != nil || ck.Value == "" {
		return utcZone
	}
	name, err := url.QueryUnescape(ck.Value)
	if err != nil {
		name = ck.Value
	}
	loc, err := loadDisplayZone(name)
	if err != nil {
		z := utcZone
		z.Notice = fmt.Sprintf("Display zone %q (cookie %s): %v. Times are shown in UTC; pick a zone above.", name, zoneCookie, err)
		return z
	}
	return displayZone{Name: name, Loc: loc}
}

// loadDisplayZone is time.LoadLocation without the two names that mean
// something else there: "" (UTC) and "Local" (the server's zone, which the
// viewer knows nothing about).
func loadDisplayZone(name string) (*time.Location, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("empty zone name")
	case name == "Local":
		return nil, fmt.Errorf(`"Local" is the server's zone, not an IANA name such as Europe/Paris`)
	case len(name) > maxZoneName:
		return nil, fmt.Errorf("longer than %d bytes", maxZoneName)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("not a known IANA zone (want a name such as Europe/Paris)")
	}
	return loc, nil
}

// setZone stores the display zone chosen in the header's form and goes
// back to the page it was chosen on. An empty zone forgets the choice
// (UTC). An unknown zone is stored as chosen, so that every page says it
// is not in force, rather than being dropped without a word.
func (c *console) setZone(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "zone", "back")
	name := strings.TrimSpace(q.get("zone"))
	if len(name) > 2*maxZoneName {
		name = name[:2*maxZoneName]
	}
	//nolint:gosec // G124: Secure follows the connection: a plain-HTTP console on loopback must keep its cookie
	ck := &http.Cookie{
		Name: zoneCookie, Value: url.QueryEscape(name), Path: c.prefix, MaxAge: zoneCookieAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	}
	if name == "" {
		ck.MaxAge = -1
	}
	http.SetCookie(w, ck)
	http.Redirect(w, r, c.backTo(q.get("back")), http.StatusSeeOther)
}

// backTo returns back when it is a path of this console, its root
// otherwise, so that the zone form cannot redirect anywhere else.
func (c *console) backTo(back string) string {
	u, err := url.Parse(back)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(back, c.prefix) || strings.HasPrefix(back, "//") || strings.Contains(back, `\`) {
		return c.prefix
	}
	return back
}

// Layouts of the pages' times: seconds matter for a scheduler, the zone is
// said once in the header. The weekday helps read a cron schedule's fires.
const (
	layoutAt  = "2006-01-02 15:04:05"
	layoutDay = "Mon 2006-01-02 15:04:05"
	// layoutAlso is a fire's time in a second zone, beside its date in
	// the first: the weekday is enough to tell the day.
	layoutAlso = "Mon 15:04:05"
	// layoutInput is how the executions filters show a time, and the
	// first layout parseInstant reads.
	layoutInput = "2006-01-02 15:04"
)

// timeView is one instant as a page shows it.
type timeView struct {
	ISO   string // RFC 3339 UTC, for <time datetime>
	Text  string // in the display zone
	Rel   string // "in 3 min", "2 h ago"
	Title string // in the task's zone: "2026-11-30 10:00:00 CET (Europe/Paris)"
}

func newTimeView(t time.Time, layout string, display *time.Location, taskZone string, now time.Time) timeView {
	return timeView{
		ISO:   t.UTC().Format(time.RFC3339),
		Text:  t.In(display).Format(layout),
		Rel:   relative(now, t),
		Title: inZone(t, taskZone),
	}
}

// fireView is one fire of the schedule form's expression: in the zone
// the expression is read in, which is how its author thinks of it, and in
// the display zone beside it when that is another.
type fireView struct {
	ISO  string // RFC 3339 UTC, for <time datetime>
	Text string // "Tue 2026-12-01 08:30:00", in Zone
	Zone string
	Also string // "Tue 07:30:00 UTC", in the display zone; empty when that is Zone
}

func newFireView(t time.Time, zone string, display displayZone) fireView {
	loc, err := loadDisplayZone(zone)
	if err != nil {
		loc, zone = time.UTC, "UTC"
	}
	v := fireView{ISO: t.UTC().Format(time.RFC3339), Text: t.In(loc).Format(layoutDay), Zone: zone}
	if display.Name != zone {
		v.Also = t.In(display.Loc).Format(layoutAlso) + " " + display.Name
	}
	return v
}

// inZone shows t in the named zone, saying which: the hover text of a run
// time. An unknown or empty zone reads as UTC, which is what the engine
// uses then.
func inZone(t time.Time, zone string) string {
	loc, err := loadDisplayZone(zone)
	if err != nil {
		loc, zone = time.UTC, "UTC"
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST") + " (" + zone + ")"
}

// relative says how far t is from now in the largest unit that fits.
func relative(now, t time.Time) string {
	d := t.Sub(now)
	future := d > 0
	if !future {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		return "now"
	case d < 90*time.Second:
		s = fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
	case d < 90*time.Minute:
		s = fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h", int(d.Round(time.Hour)/time.Hour))
	default:
		s = fmt.Sprintf("%d d", int(d.Round(24*time.Hour)/(24*time.Hour)))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// millis shows a duration in milliseconds in the unit a person reads:
// "350 ms", "1.2 s", "2 min 3 s", "1 h 5 min".
func millis(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", ms)
	case d < 10*time.Second:
		return fmt.Sprintf("%.2g s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return twoUnits(d.Round(time.Second), time.Minute, "min", time.Second, "s")
	}
	return twoUnits(d.Round(time.Minute), time.Hour, "h", time.Minute, "min")
}

// twoUnits shows d as "2 min 3 s", or "2 min" when the smaller unit is 0.
func twoUnits(d, big time.Duration, bigName string, small time.Duration, smallName string) string {
	s := fmt.Sprintf("%d %s", int(d/big), bigName)
	if rest := int(d % big / small); rest != 0 {
		s += fmt.Sprintf(" %d %s", rest, smallName)
	}
	return s
}

// parseInstant reads a time as the executions filters take it: a date
// and time as the form shows them ("2026-11-30 09:00", read in loc, which
// is the display zone on the page and UTC in the API), a date, an RFC 3339
// time, or Unix milliseconds. It returns Unix milliseconds, 0 when empty.
func parseInstant(field, s string, loc *time.Location) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixMilli(), nil
	}
	for _, layout := range []string{layoutInput, "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t.UnixMilli(), nil
		}
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms > 0 && strconv.FormatInt(ms, 10) == s {
		return ms, nil
	}
	return 0, fieldError(field, s, fmt.Sprintf("want a date and time such as %s (read in %s), a date, an RFC 3339 time or Unix milliseconds",
		exampleInput, loc))
}

// exampleInput is the filter inputs' placeholder, in layoutInput.
const exampleInput = "2026-11-30 09:00"

// inputText shows a filter's time again as the form's input takes it, in
// loc; raw as typed when it did not parse.
func inputText(ms int64, raw string, loc *time.Location) string {
	if ms == 0 {
		return raw
	}
	return time.UnixMilli(ms).In(loc).Format(layoutInput)
}
