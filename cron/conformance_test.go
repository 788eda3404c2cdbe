package cron

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the tables name zones; CI images may lack a zoneinfo database

	"github.com/stretchr/testify/require"
)

// The conformance tables in testdata/conformance hold the fire times that real
// implementations nobody here wrote compute for a corpus of specs: Quartz
// 2.3.2's CronExpression for the Quartz dialect (quartz.jsonl) and croniter
// 1.3.5 for the default dialect (cron.jsonl). generate.sh rebuilds them; CI
// only reads them.
//
// The promise checked here: a spec a reference rejects, we reject (always).
// A spec it accepts, we accept and fire at the same instants, except for the
// cases in deliberateDifferences, each of which must still differ, in the way
// its kind says.

// diffKind names the way a case is allowed to differ. Every kind but
// diffRefBug is checked against the fire times, not only trusted.
type diffKind string

const (
	// diffStricter: the reference accepts the spec, we reject it.
	diffStricter diffKind = "stricter"
	// diffFallBackFirst: a fixed-time spec whose wall time happens twice.
	// We fire at the first occurrence only: every fire the reference has and
	// we lack is a second occurrence, every one we add is a first occurrence.
	diffFallBackFirst diffKind = "fall-back-first"
	// diffGapShift: a fixed-time spec whose wall time does not exist. We fire
	// once, at the end of the gap: every fire we add is a gap's end, every
	// one the reference has and we lack lies less than the gap's length
	// after it.
	diffGapShift diffKind = "gap-shift"
	// diffGapSkip: a wildcard spec across a spring-forward. We fire nothing
	// for wall times in the gap; the reference fires for one, mapped past
	// the gap. We add nothing; what we lack lies less than the gap's length
	// after the gap's end.
	diffGapSkip diffKind = "gap-skip"
	// diffRepeatedHour: a wildcard spec across a fall-back. We fire at every
	// matching instant: what we add has a wall time that happens twice, and
	// we lack nothing.
	diffRepeatedHour diffKind = "repeated-hour"
	// diffRefDST: croniter's DST handling, which moves fires by the zone's
	// DST delta and, inside a repeated hour, goes back in time. Every fire we
	// lack is one DST delta (30 or 60 minutes) from one of ours, or is not
	// after the start or the reference's previous fire; every fire we add is
	// one DST delta from a reference fire.
	diffRefDST diffKind = "ref-dst"
	// diffDomDow: day-of-month and day-of-week are both restricted (neither
	// is "*" or "?"), so for us either matches; we only add fires.
	diffDomDow diffKind = "dom-dow"
	// diffYearBound: Quartz 2.3.2 stops searching after its MAX_YEAR, the
	// year it runs in plus 100 (quartzMaxYear for these tables); we search to
	// MaxYear. We lack nothing and add only fires after quartzMaxYear.
	diffYearBound diffKind = "year-bound"
	// diffRefBug: the reference is wrong or cannot evaluate the spec; the
	// reason says how. Only "it still differs" is checked.
	diffRefBug diffKind = "ref-bug"
)

// quartzMaxYear is org.quartz.CronExpression.MAX_YEAR when quartz.jsonl was
// generated (in 2026; see generate.sh).
const quartzMaxYear = 2126

type deliberate struct {
	spec   string // the case's spec, so a renumbered table cannot pass silently
	kind   diffKind
	reason string
}

// deliberateDifferences lists, by case id, every case where we knowingly do
// not do what the reference does. The test fails when a listed case agrees
// with the reference (remove it) or differs in another way than its kind.
var deliberateDifferences = map[string]deliberate{
	// Quartz 2.3.2 (quartz.jsonl): stricter.
	"q0318": {"0 0 0 1 1 ? 2250", diffStricter, "stricter: year 2250 is past our MaxYear 2199; Quartz accepts it (and never fires: it is past its MAX_YEAR too)"},
	"q0330": {"0 0 12 * * ?X", diffStricter, "stricter: Quartz ignores one character after \"?\""},
	"q0331": {"0 0 12X * * ?", diffStricter, "stricter: Quartz ignores the trailing \"X\""},
	"q0332": {"0 0 12 * * ? 2026 extra", diffStricter, "stricter: Quartz ignores every field after the 7th"},
	"q0333": {"0 0 12 * * ? 2026 2027", diffStricter, "stricter: Quartz ignores every field after the 7th"},
	"q0334": {"0 0 12 * * ? *X", diffStricter, "stricter: Quartz ignores the \"X\" after \"*\""},
	"q0335": {"0 0 12 ? * MON,", diffStricter, "stricter: Quartz skips empty list items"},
	"q0336": {"0 0 12 ? * ,MON", diffStricter, "stricter: Quartz skips empty list items"},
	"q0337": {"0 0 12 ? * MON,,FRI", diffStricter, "stricter: Quartz skips empty list items"},
	"q0338": {"0 0 12 1,,15 * ?", diffStricter, "stricter: Quartz skips empty list items"},
	"q0341": {"0 0 0 ? * MON-FRI#2", diffStricter, "stricter: Quartz ignores \"#2\" after a name range (MON-FRI)"},
	"q0342": {"0 0 0 ? * 1-3#2", diffStricter, "stricter: Quartz ignores \"#2\" after a range (1-3)"},
	"q0343": {"0 5-3-1 * * * ?", diffStricter, "stricter: Quartz reads 5-3 (wrapping: every minute but 4) and ignores \"-1\""},
	"q0344": {"0 0 0 ? * L-2", diffStricter, "stricter: Quartz reads a lone L (Saturday) and ignores \"-2\""},
	"q0345": {"0 0 0 L-W * ?", diffStricter, "stricter: Quartz reads L-W as LW (the missing offset is 0)"},
	"q0346": {"0 0 0 1W,15W * ?", diffStricter, "stricter: Quartz keeps only the first W day (1W) of a list"},
	"q0347": {"0 0 0 ? * 2#1,3", diffStricter, "stricter: Quartz uses only the first day of the list (MON#1) and ignores \",3\""},
	"q0348": {"0 0 0 ? * 0#1", diffStricter, "stricter: Quartz does not range-check n#k; 0#1 fires on the first Saturday"},
	"q0349": {"0 0 0 0W * ?", diffStricter, "stricter: Quartz accepts 0W, then getTimeAfter never returns"},
	"q0350": {"*/0 * * * * ?", diffStricter, "stricter: Quartz reads the step 0 in */0 as 1 (every second)"},
	"q0351": {"0 0/0 * * * ?", diffStricter, "stricter: Quartz reads 0/0 as 0"},
	"q0352": {"0 0 0 ? * 2-6/0", diffStricter, "stricter: Quartz reads 2-6/0 as 2 (Monday only)"},
	"q0353": {"0 0 0 ? * 2-6/8", diffStricter, "stricter: Quartz does not range-check a step after a range; 2-6/8 is Monday only"},
	"q0354": {"0 0 0 1-31/0 * ?", diffStricter, "stricter: Quartz reads 1-31/0 as the 1st"},
	"q0355": {"0 L * * * ?", diffStricter, "stricter: Quartz accepts L in the minute field, leaves the minute set empty and getTimeAfter throws NoSuchElementException"},
	"q0356": {"0 0 12 * * ? 1969", diffStricter, "stricter: Quartz does not range-check years; 1969 is accepted and never fires"},
	"q0357": {"0 0 0 1 JANUARY ?", diffStricter, "stricter: Quartz reads the first three letters (JAN) and ignores \"UARY\""},
	"q0358": {"0 0 12 * * ? 20x6", diffStricter, "stricter: Quartz reads 20x6 as the year 20 and never fires"},
	"q0359": {"0 0 12 ? * 1-7#2", diffStricter, "stricter: Quartz ignores \"#2\" after a range (1-7, every day)"},
	"q0360": {"0 0 12 * * ? 2026/0", diffStricter, "stricter: Quartz reads 2026/0 as 2026"},
	// Quartz 2.3.2 (quartz.jsonl): ref-bug.
	"q0243": {"0 0 0 31W * ?", diffRefBug, "Quartz bug: 31W in a 30-day month rolls into the next month and fires on the 30th when the 1st is a Saturday; we fire only in months with a 31st"},
	"q0244": {"0 0 0 31W * ?", diffRefBug, "Quartz bug: 31W in a 30-day month rolls into the next month and fires on the 30th when the 1st is a Saturday; we fire only in months with a 31st"},
	"q0245": {"0 0 0 31W * ?", diffRefBug, "Quartz bug: 31W in a 30-day month rolls into the next month and fires on the 30th when the 1st is a Saturday; we fire only in months with a 31st"},
	"q0246": {"0 0 0 31W * ?", diffRefBug, "Quartz bug: 31W in a 30-day month rolls into the next month and fires on the 30th when the 1st is a Saturday; we fire only in months with a 31st"},
	"q0339": {"0 0 0 1 JAN/3 ?", diffStricter, "stricter: Quartz silently drops \"/3\" after a month name (JAN only); we refuse rather than fire on other days than Quartz"},
	"q0340": {"0 0 0 ? * MON-FRI/2", diffStricter, "stricter: Quartz silently drops \"/2\" after a name range (MON-FRI); we refuse rather than fire on other days than Quartz"},
	// Quartz 2.3.2 (quartz.jsonl): year-bound.
	"q0287": {"0 0 0 ? 2 5#5", diffYearBound, "Quartz 2.3.2 stops after MAX_YEAR (2126 = year generated + 100); we search to 2199"},
	"q0288": {"0 0 0 ? 2 5#5", diffYearBound, "Quartz 2.3.2 stops after MAX_YEAR (2126 = year generated + 100); we search to 2199"},
	"q0289": {"0 0 0 ? 2 5#5", diffYearBound, "Quartz 2.3.2 stops after MAX_YEAR (2126 = year generated + 100); we search to 2199"},
	"q0290": {"0 0 0 ? 2 5#5", diffYearBound, "Quartz 2.3.2 stops after MAX_YEAR (2126 = year generated + 100); we search to 2199"},
	"q0317": {"0 0 0 1 1 ? 2150", diffYearBound, "Quartz 2.3.2 stops after MAX_YEAR (2126 = year generated + 100); we search to 2199"},
	"q0322": {"0 0 0 ? * 7#5 2199", diffYearBound, "Quartz 2.3.2 stops after MAX_YEAR (2126 = year generated + 100); we search to 2199"},
	"q0323": {"0 0 0 ? 2 1#5", diffYearBound, "Quartz 2.3.2 stops after MAX_YEAR (2126 = year generated + 100); we search to 2199"},
	// Quartz 2.3.2 (quartz.jsonl): fall-back-first.
	"q0453": {"0 30 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:30 of 2026-11-01, we fire the first"},
	"q0455": {"0 30 1 * * ?", diffFallBackFirst, "fall-back: the start lies between the two 01:30s of 2026-11-01; Quartz fires the second, we fired the first, before the start"},
	"q0463": {"0 0 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:00 of 2026-11-01, we fire the first"},
	"q0468": {"0 59 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:59 of 2026-11-01, we fire the first"},
	"q0469": {"0 59 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:59 of 2026-11-01, we fire the first"},
	"q0470": {"0 59 1 * * ?", diffFallBackFirst, "fall-back: the start lies between the two 01:59s of 2026-11-01; Quartz fires the second, we fired the first, before the start"},
	"q0478": {"0 0 1-3 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:00 of 2026-11-01, we fire the first"},
	"q0483": {"0 0,30 1,2 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:00 of 2026-11-01, we fire the first"},
	"q0485": {"0 0,30 1,2 * * ?", diffFallBackFirst, "fall-back: the start lies between the two 01:30s of 2026-11-01; Quartz fires the second, we fired the first, before the start"},
	"q0488": {"0 30 0-23 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:30 of 2026-11-01, we fire the first"},
	"q0490": {"0 30 0-23 * * ?", diffFallBackFirst, "fall-back: the start lies between the two 01:30s of 2026-11-01; Quartz fires the second, we fired the first, before the start"},
	"q0493": {"0 0/30 1-2 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:00 of 2026-11-01, we fire the first"},
	"q0495": {"0 0/30 1-2 * * ?", diffFallBackFirst, "fall-back: the start lies between the two 01:30s of 2026-11-01; Quartz fires the second, we fired the first, before the start"},
	"q0503": {"0 30 1 ? * SUN", diffFallBackFirst, "fall-back: Quartz fires the second 01:30 of 2026-11-01, we fire the first"},
	"q0505": {"0 30 1 ? * SUN", diffFallBackFirst, "fall-back: the start lies between the two 01:30s of 2026-11-01; Quartz fires the second, we fired the first, before the start"},
	"q0543": {"0 30 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:30 of 2026-10-25, we fire the first"},
	"q0545": {"0 30 1 * * ?", diffFallBackFirst, "fall-back: the start lies between the two 01:30s of 2026-10-25; Quartz fires the second, we fired the first, before the start"},
	"q0548": {"0 0 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:00 of 2026-10-25, we fire the first"},
	"q0558": {"0 30 0-3 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:30 of 2026-10-25, we fire the first"},
	"q0560": {"0 30 0-3 * * ?", diffFallBackFirst, "fall-back: the start lies between the two 01:30s of 2026-10-25; Quartz fires the second, we fired the first, before the start"},
	"q0576": {"0 45 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:45 of 2026-04-05, we fire the first"},
	"q0577": {"0 45 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:45 of 2026-04-05, we fire the first"},
	"q0578": {"0 45 1 * * ?", diffFallBackFirst, "fall-back: the start lies between the two 01:45s of 2026-04-05; Quartz fires the second, we fired the first, before the start"},
	"q0581": {"0 30 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:30 of 2026-04-05, we fire the first"},
	"q0582": {"0 30 1 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:30 of 2026-04-05, we fire the first"},
	"q0601": {"0 0,15,30,45 1-2 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:30 of 2026-04-05, we fire the first"},
	"q0602": {"0 0,15,30,45 1-2 * * ?", diffFallBackFirst, "fall-back: Quartz fires the second 01:30 of 2026-04-05, we fire the first"},
	"q0603": {"0 0,15,30,45 1-2 * * ?", diffFallBackFirst, "fall-back: the start lies between the two 01:45s of 2026-04-05; Quartz fires the second, we fired the first, before the start"},
	// Quartz 2.3.2 (quartz.jsonl): gap-shift.
	"q0446": {"0 30 2 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0447": {"0 30 2 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0456": {"0 0 2 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0457": {"0 0 2 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0481": {"0 0,30 1,2 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0482": {"0 0,30 1,2 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0486": {"0 30 0-23 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0487": {"0 30 0-23 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0491": {"0 0/30 1-2 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0492": {"0 0/30 1-2 * * ?", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0496": {"0 30 2 ? * SUN", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0497": {"0 30 2 ? * SUN", diffGapShift, "spring-forward gap on 2026-03-08: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0498": {"0 30 2 ? * SUN", diffGapShift, "spring-forward gap on 2027-03-14: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0499": {"0 30 2 ? * SUN", diffGapShift, "spring-forward gap on 2027-03-14: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0500": {"0 30 2 ? * SUN", diffGapShift, "spring-forward gap on 2027-03-14: Quartz skips the day, we fire at the gap's end 03:00"},
	"q0541": {"0 30 1 * * ?", diffGapShift, "spring-forward gap on 2026-03-29: Quartz skips the day, we fire at the gap's end 02:00"},
	"q0542": {"0 30 1 * * ?", diffGapShift, "spring-forward gap on 2026-03-29: Quartz skips the day, we fire at the gap's end 02:00"},
	"q0546": {"0 0 1 * * ?", diffGapShift, "spring-forward gap on 2026-03-29: Quartz skips the day, we fire at the gap's end 02:00"},
	"q0547": {"0 0 1 * * ?", diffGapShift, "spring-forward gap on 2026-03-29: Quartz skips the day, we fire at the gap's end 02:00"},
	"q0556": {"0 30 0-3 * * ?", diffGapShift, "spring-forward gap on 2026-03-29: Quartz skips the day, we fire at the gap's end 02:00"},
	"q0557": {"0 30 0-3 * * ?", diffGapShift, "spring-forward gap on 2026-03-29: Quartz skips the day, we fire at the gap's end 02:00"},
	"q0589": {"0 15 2 * * ?", diffGapShift, "spring-forward gap on 2026-10-04: Quartz skips the day, we fire at the gap's end 02:30"},
	"q0590": {"0 15 2 * * ?", diffGapShift, "spring-forward gap on 2026-10-04: Quartz skips the day, we fire at the gap's end 02:30"},
	"q0594": {"0 0 2 * * ?", diffGapShift, "spring-forward gap on 2026-10-04: Quartz skips the day, we fire at the gap's end 02:30"},
	"q0595": {"0 0 2 * * ?", diffGapShift, "spring-forward gap on 2026-10-04: Quartz skips the day, we fire at the gap's end 02:30"},
	// Quartz 2.3.2 (quartz.jsonl): repeated-hour.
	"q0509": {"0 */15 * * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 4 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0514": {"0 0/15 * * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 4 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0518": {"0 0 * * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0519": {"0 0 * * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0523": {"0 30 * * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0524": {"0 30 * * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0528": {"0 * 1 * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 6 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0529": {"0 * 1 * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 6 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0533": {"0 */20 1-3 * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 3 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0534": {"0 */20 1-3 * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 3 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0539": {"*/30 * * * * ?", diffRepeatedHour, "fall-back on 2026-11-01: Quartz skips 6 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0564": {"0 */15 * * * ?", diffRepeatedHour, "fall-back on 2026-10-25: Quartz skips 4 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0568": {"0 0 * * * ?", diffRepeatedHour, "fall-back on 2026-10-25: Quartz skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0569": {"0 0 * * * ?", diffRepeatedHour, "fall-back on 2026-10-25: Quartz skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0573": {"0 * 1 * * ?", diffRepeatedHour, "fall-back on 2026-10-25: Quartz skips 6 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0574": {"0 * 1 * * ?", diffRepeatedHour, "fall-back on 2026-10-25: Quartz skips 6 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0607": {"0 */15 * * * ?", diffRepeatedHour, "fall-back on 2026-04-05: Quartz skips 2 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0616": {"0 */10 1,2 * * ?", diffRepeatedHour, "fall-back on 2026-04-05: Quartz skips 3 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"q0617": {"0 */10 1,2 * * ?", diffRepeatedHour, "fall-back on 2026-04-05: Quartz skips 3 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	// croniter 1.3.5 (cron.jsonl): stricter.
	"c0252": {"*/100 * * * *", diffStricter, "stricter: croniter accepts a step larger than the field (*/100 = minute 0); we reject steps above 59"},
	"c0253": {"*/100 * * * *", diffStricter, "stricter: croniter accepts a step larger than the field (*/100 = minute 0); we reject steps above 59"},
	"c0254": {"0 0 */40 * *", diffStricter, "stricter: croniter accepts a step larger than the field (*/40 = the 1st); we reject steps above 31"},
	"c0255": {"0 0 */40 * *", diffStricter, "stricter: croniter accepts a step larger than the field (*/40 = the 1st); we reject steps above 31"},
	"c0256": {"0 0 * * 0#1#2", diffStricter, "stricter: croniter matches the prefix 0#1 and ignores the trailing \"#2\""},
	"c0257": {"0 0 * * 0#1#2", diffStricter, "stricter: croniter matches the prefix 0#1 and ignores the trailing \"#2\""},
	// croniter 1.3.5 (cron.jsonl): ref-bug.
	"c0180": {"0 0 1 * 5#2", diffRefBug, "croniter bug: with a day-of-month, n#k never matches (CroniterBadDateError: failed to find next date)"},
	"c0181": {"0 0 1 * 5#2", diffRefBug, "croniter bug: with a day-of-month, n#k never matches (CroniterBadDateError: failed to find next date)"},
	"c0182": {"0 0 1 * 5#2", diffRefBug, "croniter bug: with a day-of-month, n#k never matches (CroniterBadDateError: failed to find next date)"},
	"c0183": {"0 0 1 * 5#2", diffRefBug, "croniter bug: with a day-of-month, n#k never matches (CroniterBadDateError: failed to find next date)"},
	"c0219": {"0 0 12 * * 7", diffRefBug, "croniter bug: with 6 fields, day-of-week 7 is not Sunday and never matches (CroniterBadDateError)"},
	"c0220": {"0 0 12 * * 7", diffRefBug, "croniter bug: with 6 fields, day-of-week 7 is not Sunday and never matches (CroniterBadDateError)"},
	// croniter 1.3.5 (cron.jsonl): dom-dow.
	"c0121": {"0 0 1-31 * 1", diffDomDow, "dom-dow: croniter collapses the full range 1-31 to \"*\", so only Mondays fire; for us both day fields are restricted and every day matches"},
	"c0122": {"0 0 1 * 0-6", diffDomDow, "dom-dow: croniter collapses the full range 0-6 to \"*\", so only the 1st fires; for us both day fields are restricted and every day matches"},
	// croniter 1.3.5 (cron.jsonl): gap-shift.
	"c0307": {"30 2 * * *", diffGapShift, "spring-forward gap on 2026-03-08: croniter fires at 2026-03-08 03:30 -04:00, we fire at the gap's end 03:00"},
	"c0308": {"30 2 * * *", diffGapShift, "spring-forward gap on 2026-03-08: croniter fires at 2026-03-08 03:30 -04:00, we fire at the gap's end 03:00"},
	"c0347": {"30 0-23 * * *", diffGapShift, "spring-forward gap on 2026-03-08: croniter skips the day, we fire at the gap's end 03:00"},
	"c0348": {"30 0-23 * * *", diffGapShift, "spring-forward gap on 2026-03-08: croniter skips the day, we fire at the gap's end 03:00"},
	"c0352": {"30 2 * * 0", diffGapShift, "spring-forward gap on 2026-03-08: croniter fires at 2026-03-08 03:30 -04:00, we fire at the gap's end 03:00"},
	"c0353": {"30 2 * * 0", diffGapShift, "spring-forward gap on 2026-03-08: croniter fires at 2026-03-08 03:30 -04:00, we fire at the gap's end 03:00"},
	"c0355": {"30 2 * * 0", diffGapShift, "spring-forward gap on 2027-03-14: croniter fires at 2027-03-14 03:30 -04:00, we fire at the gap's end 03:00"},
	"c0356": {"30 2 * * 0", diffGapShift, "spring-forward gap on 2027-03-14: croniter fires at 2027-03-14 03:30 -04:00, we fire at the gap's end 03:00"},
	"c0382": {"0 30 2 * * *", diffGapShift, "spring-forward gap on 2026-03-08: croniter fires at 2026-03-08 03:30 -04:00, we fire at the gap's end 03:00"},
	"c0383": {"0 30 2 * * *", diffGapShift, "spring-forward gap on 2026-03-08: croniter fires at 2026-03-08 03:30 -04:00, we fire at the gap's end 03:00"},
	"c0392": {"30 1 * * *", diffGapShift, "spring-forward gap on 2026-03-29: croniter fires at 2026-03-29 02:30 +01:00, we fire at the gap's end 02:00"},
	"c0393": {"30 1 * * *", diffGapShift, "spring-forward gap on 2026-03-29: croniter fires at 2026-03-29 02:30 +01:00, we fire at the gap's end 02:00"},
	"c0407": {"30 0-3 * * *", diffGapShift, "spring-forward gap on 2026-03-29: croniter skips the day, we fire at the gap's end 02:00"},
	"c0408": {"30 0-3 * * *", diffGapShift, "spring-forward gap on 2026-03-29: croniter skips the day, we fire at the gap's end 02:00"},
	"c0440": {"15 2 * * *", diffGapShift, "spring-forward gap on 2026-10-04: croniter fires at 2026-10-04 02:45 +11:00, we fire at the gap's end 02:30"},
	"c0441": {"15 2 * * *", diffGapShift, "spring-forward gap on 2026-10-04: croniter fires at 2026-10-04 02:45 +11:00, we fire at the gap's end 02:30"},
	// croniter 1.3.5 (cron.jsonl): gap-skip.
	"c0422": {"* 1 * * *", diffGapSkip, "spring-forward gap on 2026-03-29: croniter fires at 2026-03-29 02:00 +01:00 for a wall time inside the gap; a wildcard spec fires nothing there"},
	"c0423": {"* 1 * * *", diffGapSkip, "spring-forward gap on 2026-03-29: croniter fires at 2026-03-29 02:00 +01:00 for a wall time inside the gap; a wildcard spec fires nothing there"},
	"c0465": {"0 * * * *", diffGapSkip, "spring-forward gap on 2026-10-04: croniter fires at 2026-10-04 02:30 +11:00 for a wall time inside the gap; a wildcard spec fires nothing there"},
	"c0466": {"0 * * * *", diffGapSkip, "spring-forward gap on 2026-10-04: croniter fires at 2026-10-04 02:30 +11:00 for a wall time inside the gap; a wildcard spec fires nothing there"},
	// croniter 1.3.5 (cron.jsonl): repeated-hour.
	"c0360": {"*/15 * * * *", diffRepeatedHour, "fall-back on 2026-11-01: croniter skips 4 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0364": {"0 * * * *", diffRepeatedHour, "fall-back on 2026-11-01: croniter skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0365": {"0 * * * *", diffRepeatedHour, "fall-back on 2026-11-01: croniter skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0369": {"30 * * * *", diffRepeatedHour, "fall-back on 2026-11-01: croniter skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0370": {"30 * * * *", diffRepeatedHour, "fall-back on 2026-11-01: croniter skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0379": {"*/20 1-3 * * *", diffRepeatedHour, "fall-back on 2026-11-01: croniter skips 3 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0380": {"*/20 1-3 * * *", diffRepeatedHour, "fall-back on 2026-11-01: croniter skips 3 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0390": {"0 */30 * * * *", diffRepeatedHour, "fall-back on 2026-11-01: croniter skips 2 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0415": {"*/15 * * * *", diffRepeatedHour, "fall-back on 2026-10-25: croniter skips 4 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0419": {"0 * * * *", diffRepeatedHour, "fall-back on 2026-10-25: croniter skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0420": {"0 * * * *", diffRepeatedHour, "fall-back on 2026-10-25: croniter skips 1 fire in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0458": {"*/15 * * * *", diffRepeatedHour, "fall-back on 2026-04-05: croniter skips 2 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0467": {"*/10 1,2 * * *", diffRepeatedHour, "fall-back on 2026-04-05: croniter skips 3 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	"c0468": {"*/10 1,2 * * *", diffRepeatedHour, "fall-back on 2026-04-05: croniter skips 3 fires in the repeated hour; a wildcard spec fires at every matching instant"},
	// croniter 1.3.5 (cron.jsonl): ref-dst.
	"c0126": {"15 10 L * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-31 09:15 -04:00 instead of the spec's wall time)"},
	"c0127": {"15 10 L * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-31 09:15 -04:00 instead of the spec's wall time)"},
	"c0130": {"0 0 L * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-30 23:00 -04:00 instead of the spec's wall time)"},
	"c0131": {"0 0 L * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-30 23:00 -04:00 instead of the spec's wall time)"},
	"c0138": {"0 0 1,L * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-30 23:00 -04:00 instead of the spec's wall time)"},
	"c0139": {"0 0 1,L * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-30 23:00 -04:00 instead of the spec's wall time)"},
	"c0142": {"0 0 15,L * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-14 23:00 -04:00 instead of the spec's wall time)"},
	"c0143": {"0 0 15,L * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-14 23:00 -04:00 instead of the spec's wall time)"},
	"c0146": {"0 0 * * 5#3", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-19 23:00 -04:00 instead of the spec's wall time)"},
	"c0147": {"0 0 * * 5#3", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-16 23:00 -04:00 instead of the spec's wall time)"},
	"c0150": {"0 0 * * fri#3", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-19 23:00 -04:00 instead of the spec's wall time)"},
	"c0151": {"0 0 * * fri#3", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-16 23:00 -04:00 instead of the spec's wall time)"},
	"c0154": {"0 0 * * MON#1", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-04-05 23:00 -04:00 instead of the spec's wall time)"},
	"c0155": {"0 0 * * MON#1", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-04-02 23:00 -04:00 instead of the spec's wall time)"},
	"c0158": {"0 0 * * 1#1", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-04-05 23:00 -04:00 instead of the spec's wall time)"},
	"c0159": {"0 0 * * 1#1", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-04-02 23:00 -04:00 instead of the spec's wall time)"},
	"c0162": {"0 0 * * 2#5", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-30 23:00 -04:00 instead of the spec's wall time)"},
	"c0163": {"0 0 * * 2#5", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-05-29 23:00 -04:00 instead of the spec's wall time)"},
	"c0166": {"0 0 * * 5#2,1#1", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-12 23:00 -04:00 instead of the spec's wall time)"},
	"c0167": {"0 0 * * 5#2,1#1", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-04-02 23:00 -04:00 instead of the spec's wall time)"},
	"c0170": {"0 0 * * 5L", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-26 23:00 -04:00 instead of the spec's wall time)"},
	"c0171": {"0 0 * * 5L", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-30 23:00 -04:00 instead of the spec's wall time)"},
	"c0174": {"0 0 * * 0L", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-28 23:00 -04:00 instead of the spec's wall time)"},
	"c0175": {"0 0 * * 0L", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-25 23:00 -04:00 instead of the spec's wall time)"},
	"c0178": {"0 0 * * 7L", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-28 23:00 -04:00 instead of the spec's wall time)"},
	"c0179": {"0 0 * * 7L", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-25 23:00 -04:00 instead of the spec's wall time)"},
	"c0190": {"0 0 28-31 * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-27 23:00 +01:00 instead of the spec's wall time)"},
	"c0191": {"0 0 28-31 * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2028-03-27 23:00 +01:00 instead of the spec's wall time)"},
	"c0309": {"30 2 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-11-01 03:30 -05:00 instead of the spec's wall time)"},
	"c0312": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-09 00:30 -04:00 instead of the spec's wall time)"},
	"c0313": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-09 00:30 -04:00 instead of the spec's wall time)"},
	"c0314": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-11-02 02:30 -05:00 instead of the spec's wall time)"},
	"c0315": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-11-02 02:30 -05:00 instead of the spec's wall time)"},
	"c0316": {"30 1 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0319": {"0 2 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-11-01 03:00 -05:00 instead of the spec's wall time)"},
	"c0322": {"0 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-09 00:00 -04:00 instead of the spec's wall time)"},
	"c0323": {"0 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-09 00:00 -04:00 instead of the spec's wall time)"},
	"c0324": {"0 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-11-02 02:00 -05:00 instead of the spec's wall time)"},
	"c0325": {"0 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-11-02 02:00 -05:00 instead of the spec's wall time)"},
	"c0327": {"59 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-09 00:59 -04:00 instead of the spec's wall time)"},
	"c0328": {"59 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-03-09 00:59 -04:00 instead of the spec's wall time)"},
	"c0331": {"59 1 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0334": {"0 3 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-11-01 04:00 -05:00 instead of the spec's wall time)"},
	"c0346": {"0,30 1,2 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0351": {"30 0-23 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0354": {"30 2 * * 0", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-11-01 03:30 -05:00 instead of the spec's wall time)"},
	"c0361": {"*/15 * * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0371": {"30 * * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0375": {"* 1 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0376": {"* 1 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0381": {"*/20 1-3 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0384": {"0 30 2 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-11-01 03:30 -05:00 instead of the spec's wall time)"},
	"c0391": {"0 */30 * * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-11-01"},
	"c0394": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-10-26 02:30 +00:00 instead of the spec's wall time)"},
	"c0395": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-10-26 02:30 +00:00 instead of the spec's wall time)"},
	"c0396": {"30 1 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-10-25"},
	"c0399": {"0 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-10-26 02:00 +00:00 instead of the spec's wall time)"},
	"c0400": {"0 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-10-26 02:00 +00:00 instead of the spec's wall time)"},
	"c0404": {"0 2 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-10-25 03:00 +00:00 instead of the spec's wall time)"},
	"c0411": {"30 0-3 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-10-25"},
	"c0416": {"*/15 * * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-10-25"},
	"c0425": {"* 1 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-10-25"},
	"c0426": {"* 1 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-10-25"},
	"c0427": {"45 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-04-06 02:15 +10:30 instead of the spec's wall time)"},
	"c0428": {"45 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-04-06 02:15 +10:30 instead of the spec's wall time)"},
	"c0429": {"45 1 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-04-05"},
	"c0430": {"45 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-10-05 01:15 +11:00 instead of the spec's wall time)"},
	"c0431": {"45 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-10-05 01:15 +11:00 instead of the spec's wall time)"},
	"c0432": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-04-06 02:00 +10:30 instead of the spec's wall time)"},
	"c0433": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-04-06 02:00 +10:30 instead of the spec's wall time)"},
	"c0435": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-10-05 01:00 +11:00 instead of the spec's wall time)"},
	"c0436": {"30 1 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-10-05 01:00 +11:00 instead of the spec's wall time)"},
	"c0437": {"15 2 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-04-05 02:45 +10:30 instead of the spec's wall time)"},
	"c0442": {"0 2 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-04-05 02:30 +10:30 instead of the spec's wall time)"},
	"c0447": {"30 2 * * *", diffRefDST, "croniter moves a fire by the DST delta after a transition (2026-04-05 03:00 +10:30 instead of the spec's wall time)"},
	"c0454": {"0,15,30,45 1-2 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-04-05"},
	"c0459": {"*/15 * * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-04-05"},
	"c0469": {"*/10 1,2 * * *", diffRefDST, "croniter steps back in time in the repeated hour of 2026-04-05"},
}

type conformanceCase struct {
	ID        string   `json:"id"`
	Spec      string   `json:"spec"`
	Ref       string   `json:"ref"` // croniter's syntax, when it differs from Spec
	TZ        string   `json:"tz"`
	Start     string   `json:"start"`
	DST       bool     `json:"dst"`
	Next      []string `json:"next"`
	NextError string   `json:"next_error"`
	Error     *string  `json:"error"`
}

// confFires is how many fires a table lists for a case; fewer means the
// reference found no more.
const confFires = 20

type confTally struct {
	cases, agree, rejectedBoth, deliberate int
}

func TestConformanceWithQuartzAndCroniter(t *testing.T) {
	t.Parallel()

	var mu sync.Mutex
	tallies := map[string]*confTally{}
	t.Cleanup(func() {
		q, c := tallies["quartz"], tallies["cron"]
		if q == nil || c == nil {
			return
		}
		t.Logf("conformance: quartz cases=%d agree=%d rejected_both=%d deliberate=%d; cron cases=%d agree=%d rejected_both=%d deliberate=%d",
			q.cases, q.agree, q.rejectedBoth, q.deliberate, c.cases, c.agree, c.rejectedBoth, c.deliberate)
	})

	seen := map[string]bool{}
	tables := []struct {
		name string
		file string
		opts []Option
	}{
		{"quartz", "quartz.jsonl", []Option{Quartz()}},
		{"cron", "cron.jsonl", nil},
	}
	for _, tb := range tables {
		cases := readConformanceTable(t, filepath.Join("testdata", "conformance", tb.file))
		require.NotEmpty(t, cases, tb.file)
		for _, c := range cases {
			require.False(t, seen[c.ID], "duplicate case id %s", c.ID)
			seen[c.ID] = true
		}
		t.Run(tb.name, func(t *testing.T) {
			t.Parallel()
			tally := &confTally{}
			for _, c := range cases {
				checkConformanceCase(t, c, tb.opts, tally)
			}
			mu.Lock()
			tallies[tb.name] = tally
			mu.Unlock()
		})
	}
	for id, d := range deliberateDifferences {
		require.True(t, seen[id], "deliberateDifferences lists %s (%q), which no table holds", id, d.spec)
	}
}

func readConformanceTable(t *testing.T, path string) []conformanceCase {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var cases []conformanceCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		var c conformanceCase
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c), "%s:%d", path, line)
		require.NotEmpty(t, c.ID, "%s:%d", path, line)
		if c.Error == nil {
			require.NotEmpty(t, c.TZ, "%s:%d", path, line)
			require.NotEmpty(t, c.Start, "%s:%d", path, line)
		}
		cases = append(cases, c)
	}
	require.NoError(t, sc.Err())
	return cases
}

func checkConformanceCase(t *testing.T, c conformanceCase, dialect []Option, tally *confTally) {
	t.Helper()
	tally.cases++
	label := fmt.Sprintf("%s %q", c.ID, c.Spec)
	d, listed := deliberateDifferences[c.ID]
	if listed && d.spec != c.Spec {
		t.Errorf("%s: deliberateDifferences[%s] is for spec %q: the table was renumbered", label, c.ID, d.spec)
		return
	}

	if c.Error != nil {
		// No exceptions, not even a listed one: a spec the reference
		// rejects must never fire here.
		_, err := Parse(c.Spec, dialect...)
		if err == nil {
			t.Errorf("%s: the reference rejects it (%s) but ParseSchedule accepts it", label, *c.Error)
			return
		}
		if listed {
			t.Errorf("%s: listed in deliberateDifferences, but both reject it: remove the entry", label)
			return
		}
		tally.rejectedBoth++
		return
	}

	loc, err := time.LoadLocation(c.TZ)
	if err != nil {
		t.Errorf("%s: zone %s: %v", label, c.TZ, err)
		return
	}
	start, err := time.Parse(time.RFC3339Nano, c.Start)
	if err != nil {
		t.Errorf("%s: start: %v", label, err)
		return
	}
	ref := make([]time.Time, len(c.Next))
	for i, s := range c.Next {
		if ref[i], err = time.Parse(time.RFC3339, s); err != nil {
			t.Errorf("%s: next[%d]: %v", label, i, err)
			return
		}
	}
	where := fmt.Sprintf("%s in %s after %s", label, c.TZ, c.Start)

	sched, err := Parse(c.Spec, append(slices.Clone(dialect), In(loc))...)
	if err != nil {
		switch {
		case !listed:
			t.Errorf("%s: the reference accepts it but ParseSchedule says: %v", where, err)
		case d.kind != diffStricter:
			t.Errorf("%s: listed as %s (%s), but we reject it: %v", where, d.kind, d.reason, err)
		default:
			tally.deliberate++
		}
		return
	}

	if got := confHasTransition(loc, start, ref); got != c.DST {
		t.Errorf("%s: the table says dst=%v, Go's zone data says %v: the generators' tzdata and Go's disagree", where, c.DST, got)
		return
	}
	ours, err := confFiresUntil(sched, start, ref)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	cmp := confComparison{c: c, loc: loc, start: start, ref: ref, ours: ours}
	cmp.missing, cmp.extra = confDiff(ref, ours)
	if len(cmp.missing) == 0 && len(cmp.extra) == 0 {
		if listed {
			t.Errorf("%s: listed as %s (%s), but we now agree with the reference: remove the entry", where, d.kind, d.reason)
			return
		}
		tally.agree++
		return
	}

	if !listed {
		guess := "none of the known kinds"
		for _, k := range []diffKind{diffFallBackFirst, diffGapShift, diffGapSkip, diffRepeatedHour, diffRefDST, diffDomDow, diffYearBound} {
			if cmp.check(k) == nil {
				guess = string(k)
				break
			}
		}
		t.Errorf("%s: differs from the reference (looks like %s)\n%s", where, guess, cmp)
		return
	}
	if d.kind == diffStricter {
		t.Errorf("%s: listed as stricter (%s), but we accept it\n%s", where, d.reason, cmp)
		return
	}
	if err := cmp.check(d.kind); err != nil {
		t.Errorf("%s: listed as %s (%s), but %v\n%s", where, d.kind, d.reason, err, cmp)
		return
	}
	tally.deliberate++
}

// confHasTransition reports whether the UTC offset of loc changes in
// (start, last listed fire], the generators' "dst".
func confHasTransition(loc *time.Location, start time.Time, ref []time.Time) bool {
	if len(ref) == 0 {
		return false
	}
	last := ref[len(ref)-1]
	_, startOffset := start.In(loc).Zone()
	for at := start; at.Before(last); {
		// ZoneBounds' end is not trusted here (golang/go#81583); stepping by
		// 12 hours finds every transition of the zones the tables use.
		at = at.Add(12 * time.Hour)
		if at.After(last) {
			at = last
		}
		if _, off := at.In(loc).Zone(); off != startOffset {
			return true
		}
	}
	return false
}

// confFiresUntil returns our fires after start, as many as can be compared
// with ref: when the reference listed confFires fires, every fire of ours up
// to its latest one; when it listed fewer (it found no more), up to
// confFires+5 of ours, so that extra fires show.
func confFiresUntil(s Schedule, start time.Time, ref []time.Time) ([]time.Time, error) {
	var limit time.Time
	maxFires := confFires + 5
	if len(ref) == confFires {
		// The latest, not the last: croniter sometimes goes back in time.
		limit = slices.MaxFunc(ref, time.Time.Compare)
		maxFires = 10_000 // a wildcard spec may add a whole repeated hour of seconds
	}
	var ours []time.Time
	for at := start; len(ours) < maxFires; {
		next := s.Next(at)
		if next.IsZero() || (!limit.IsZero() && next.After(limit)) {
			break
		}
		if !next.After(at) {
			return nil, fmt.Errorf("Next(%s) = %s, not strictly after", at.Format(time.RFC3339Nano), next.Format(time.RFC3339Nano))
		}
		ours = append(ours, next)
		at = next
	}
	return ours, nil
}

// confDiff returns the reference fires we lack and the fires we add.
func confDiff(ref, ours []time.Time) (missing, extra []time.Time) {
	in := func(ts []time.Time, x time.Time) bool {
		return slices.ContainsFunc(ts, func(y time.Time) bool { return y.Equal(x) })
	}
	for _, r := range ref {
		if !in(ours, r) {
			missing = append(missing, r)
		}
	}
	for _, o := range ours {
		if !in(ref, o) {
			extra = append(extra, o)
		}
	}
	return missing, extra
}

// confComparison is one accepted case: the reference's fires, ours, and
// their difference.
type confComparison struct {
	c       conformanceCase
	loc     *time.Location
	start   time.Time
	ref     []time.Time // as listed, which croniter does not always keep in order
	ours    []time.Time
	missing []time.Time // reference fires we lack
	extra   []time.Time // our fires the reference lacks
}

// check reports whether the difference is of kind k.
func (m confComparison) check(k diffKind) error {
	fixed := isFixedTimeSpec(m.c.Spec)
	switch k {
	case diffFallBackFirst:
		if !fixed {
			return fmt.Errorf("the spec is not fixed-time")
		}
		for _, x := range m.missing {
			if other, ok := confOtherOccurrence(x, m.loc); !ok || !other.Before(x) {
				return fmt.Errorf("we lack %s, which is not the second occurrence of a repeated wall time", confFmt(x, m.loc))
			}
		}
		for _, x := range m.extra {
			if other, ok := confOtherOccurrence(x, m.loc); !ok || !other.After(x) {
				return fmt.Errorf("we add %s, which is not the first occurrence of a repeated wall time", confFmt(x, m.loc))
			}
		}
	case diffGapShift, diffGapSkip:
		if fixed != (k == diffGapShift) {
			return fmt.Errorf("the spec is fixed-time=%v", fixed)
		}
		for _, x := range m.extra {
			if k == diffGapSkip {
				return fmt.Errorf("we add %s", confFmt(x, m.loc))
			}
			if gapEnd, gap := confGapEndingAt(x, m.loc); gap <= 0 || !gapEnd.Equal(x) {
				return fmt.Errorf("we add %s, which is not the end of a spring-forward gap", confFmt(x, m.loc))
			}
		}
		for _, x := range m.missing {
			if gapEnd, gap := confGapEndingAt(x, m.loc); gap <= 0 || x.Sub(gapEnd) >= gap {
				return fmt.Errorf("we lack %s, which is not within a gap's length after a spring-forward", confFmt(x, m.loc))
			}
		}
	case diffRepeatedHour:
		if fixed {
			return fmt.Errorf("the spec is fixed-time")
		}
		if len(m.missing) > 0 {
			return fmt.Errorf("we lack %s", confFmt(m.missing[0], m.loc))
		}
		for _, x := range m.extra {
			if _, ok := confOtherOccurrence(x, m.loc); !ok {
				return fmt.Errorf("we add %s, whose wall time happens only once", confFmt(x, m.loc))
			}
		}
	case diffRefDST:
		oneDelta := func(x time.Time, ts []time.Time) bool {
			return slices.ContainsFunc(ts, func(y time.Time) bool {
				d := x.Sub(y).Abs()
				return d == 30*time.Minute || d == time.Hour
			})
		}
		for _, x := range m.missing {
			i := slices.IndexFunc(m.ref, x.Equal)
			backwards := !x.After(m.start) || (i > 0 && !x.After(m.ref[i-1]))
			if !backwards && !oneDelta(x, m.ours) {
				return fmt.Errorf("we lack %s, which is neither one DST delta from a fire of ours nor a step back in time", confFmt(x, m.loc))
			}
		}
		for _, x := range m.extra {
			if !oneDelta(x, m.ref) {
				return fmt.Errorf("we add %s, which is not one DST delta from a reference fire", confFmt(x, m.loc))
			}
		}
	case diffDomDow:
		if !confBothDaysRestricted(m.c.Spec) {
			return fmt.Errorf("day-of-month and day-of-week are not both restricted")
		}
		if len(m.missing) > 0 {
			return fmt.Errorf("we lack %s", confFmt(m.missing[0], m.loc))
		}
	case diffYearBound:
		if len(m.missing) > 0 {
			return fmt.Errorf("we lack %s", confFmt(m.missing[0], m.loc))
		}
		for _, x := range m.extra {
			if x.In(m.loc).Year() <= quartzMaxYear {
				return fmt.Errorf("we add %s, not after Quartz's MAX_YEAR %d", confFmt(x, m.loc), quartzMaxYear)
			}
		}
	case diffRefBug:
		// Any difference will do; the reason explains it.
	default:
		return fmt.Errorf("unknown kind %q", k)
	}
	if len(m.missing) == 0 && len(m.extra) == 0 {
		return fmt.Errorf("there is no difference")
	}
	return nil
}

// String lists the difference, a few fires of each side.
func (m confComparison) String() string {
	var b strings.Builder
	list := func(title string, ts []time.Time) {
		if len(ts) == 0 {
			return
		}
		fmt.Fprintf(&b, "\t%s (%d):", title, len(ts))
		for i, x := range ts {
			if i == 6 {
				fmt.Fprintf(&b, " …")
				break
			}
			fmt.Fprintf(&b, " %s", confFmt(x, m.loc))
		}
		b.WriteString("\n")
	}
	list("reference fires we lack", m.missing)
	list("our fires the reference lacks", m.extra)
	if m.c.NextError != "" {
		fmt.Fprintf(&b, "\treference stopped with: %s\n", m.c.NextError)
	}
	return strings.TrimRight(b.String(), "\n")
}

// confBothDaysRestricted reports whether neither day field is "*" or "?".
func confBothDaysRestricted(spec string) bool {
	f := strings.Fields(spec)
	if len(f) < 5 {
		return false
	}
	dom, dow := f[2], f[4]
	if len(f) >= 6 {
		dom, dow = f[3], f[5]
	}
	free := func(s string) bool { return s == "*" || s == "?" }
	return !free(dom) && !free(dow)
}

// isFixedTimeSpec applies the package doc's rule: a spec is fixed-time when
// neither its minute nor its hour field starts with '*' (or '/', Quartz's
// "/5"). Descriptors are fixed-time except @hourly.
func isFixedTimeSpec(spec string) bool {
	f := strings.Fields(spec)
	if len(f) == 1 && strings.HasPrefix(f[0], "@") {
		return !strings.EqualFold(f[0], "@hourly")
	}
	if len(f) < 5 {
		return false
	}
	minute, hour := f[0], f[1]
	if len(f) >= 6 {
		minute, hour = f[1], f[2]
	}
	wild := func(s string) bool { return strings.HasPrefix(s, "*") || strings.HasPrefix(s, "/") }
	return !wild(minute) && !wild(hour)
}

// confOtherOccurrence returns the other instant with the same wall clock as
// t in loc, if that wall time happens twice (a fall-back repeats it).
func confOtherOccurrence(t time.Time, loc *time.Location) (time.Time, bool) {
	w := t.In(loc)
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		for _, u := range []time.Time{t.Add(-d), t.Add(d)} {
			v := u.In(loc)
			if v.Year() == w.Year() && v.YearDay() == w.YearDay() && v.Hour() == w.Hour() && v.Minute() == w.Minute() && v.Second() == w.Second() {
				return u, true
			}
		}
	}
	return time.Time{}, false
}

// confGapEndingAt returns the start of the zone period holding t (the
// instant the last transition took effect) and, when that transition moved
// clocks forward, by how much.
func confGapEndingAt(t time.Time, loc *time.Location) (time.Time, time.Duration) {
	start, _ := t.In(loc).ZoneBounds()
	if start.IsZero() {
		return start, 0
	}
	_, before := start.Add(-time.Second).In(loc).Zone()
	_, after := start.In(loc).Zone()
	return start, time.Duration(after-before) * time.Second
}

func confFmt(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02T15:04:05-07:00") + " (" + t.UTC().Format(time.RFC3339) + ")"
}
