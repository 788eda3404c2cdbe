package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/xtimer-go/xtimer/internal/engine"
	"github.com/xtimer-go/xtimer/internal/store"
)

// Backfill from the console and the API (Scheduler.Backfill):
//
//	GET  api/tasks/{code}/backfill?from=&to=   BackfillPreview: the fires the range holds, and how many have no row
//	POST api/tasks/{code}/backfill             BackfillRange: records them (BackfillResult)
//
// from and to are RFC 3339 times. A range Backfill refuses (after now,
// before the retention, more than 10,000 fires) answers 400 naming the
// bound, as a malformed time does.

// BackfillRange is the body of POST api/tasks/{code}/backfill.
type BackfillRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// BackfillResult answers POST api/tasks/{code}/backfill.
type BackfillResult struct {
	// Recorded is how many fires of the range had no row and now do.
	Recorded int `json:"recorded"`
}

// BackfillPreview answers GET api/tasks/{code}/backfill.
type BackfillPreview struct {
	// Fires is how many fires of the task's schedule the range holds.
	Fires int `json:"fires"`
	// New is how many of them have no row: what a backfill would record.
	New int `json:"new"`
}

// backfillTime reads one end of a range: an RFC 3339 time, required.
func backfillTime(field, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fieldError(field, s, `required: want an RFC 3339 time such as "2026-11-30T09:00:00Z"`)
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fieldError(field, s, `want an RFC 3339 time such as "2026-11-30T09:00:00Z"`)
	}
	return at, nil
}

// backfillRange reads both ends.
func backfillRange(from, to string) (time.Time, time.Time, error) {
	f, err := backfillTime("from", from)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	t, err := backfillTime("to", to)
	return f, t, err
}

func (c *console) apiBackfill(w http.ResponseWriter, r *http.Request) {
	var body BackfillRange
	c.act(w, r, store.ActionBackfill, &body, func(ctx context.Context, code string) (outcome, error) {
		from, to, err := backfillRange(body.From, body.To)
		if err != nil {
			return outcome{}, err
		}
		n, err := c.s.Backfill(ctx, code, from, to)
		if err != nil {
			return outcome{}, err
		}
		detail := fmt.Sprintf("%s to %s: %d fires recorded", from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), n)
		return outcome{data: BackfillResult{Recorded: n}, detail: detail}, nil
	})
}

func (c *console) apiBackfillPreview(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "from", "to")
	if q.err != nil {
		writeError(w, r, q.err)
		return
	}
	code := r.PathValue("code")
	if err := checkText("code", code); err != nil {
		writeError(w, r, err)
		return
	}
	from, to, err := backfillRange(q.get("from"), q.get("to"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	p, err := c.backfillPreview(r.Context(), code, from, to)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeData(w, p, "")
}

// backfillPreview counts what a Backfill of the range would find and
// record, by the bounds Backfill applies, without recording anything.
func (c *console) backfillPreview(ctx context.Context, code string, from, to time.Time) (BackfillPreview, error) {
	t, err := c.st.Task(ctx, c.sopts.App, code)
	if err != nil {
		return BackfillPreview{}, err
	}
	sched, err := t.Schedule()
	if err != nil {
		return BackfillPreview{}, fmt.Errorf("xtimer/admin: stored schedule of %q: %w", code, err)
	}
	cals, err := c.calendarDays(ctx, c.sopts.App, t)
	if err != nil {
		return BackfillPreview{}, err
	}
	sched = cals.excluding(t, sched) // excluded days have no fires to backfill
	var endAt time.Time
	if t.EndAtMs != 0 {
		endAt = time.UnixMilli(t.EndAtMs)
	}
	fires, err := engine.BackfillFires(code, sched, endAt, from, to, c.now(), c.sopts.Retention)
	if err != nil || len(fires) == 0 {
		return BackfillPreview{}, err
	}
	have, err := c.st.RunTimesIn(ctx, c.sopts.App, code, fires[0].UnixMilli(), fires[len(fires)-1].UnixMilli()+1)
	if err != nil {
		return BackfillPreview{}, err
	}
	rows := make(map[int64]bool, len(have))
	for _, ms := range have {
		rows[ms] = true
	}
	p := BackfillPreview{Fires: len(fires)}
	for _, at := range fires {
		if !rows[at.UnixMilli()] {
			p.New++
		}
	}
	return p, nil
}
