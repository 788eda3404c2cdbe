package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Roll-ups: per app, task, UTC day and final status, how many executions
// there were, so that the console's daily chart outlives the executions
// that retention deletes. They are never deleted by xtimer: tasks × days ×
// 4 rows, small.
//
// Every final execution is counted exactly once, in one of two ways:
//
//   - Deleted before its day is rolled up (the per-task cap deletes recent
//     rows; a day with a stuck row is never rolled up): the transaction
//     that deletes it adds it to its day's counts (deleteFinal).
//   - Still there when its day is rolled up: RollupDay counts it and, in the
//     same transaction, writes the day's marker, a row with TaskCode and
//     Status empty (a task code is never empty). Executions of a day with
//     a marker are deleted without being counted again.
//
// RollupDay rolls a day up once and only once every execution of it is
// final, and its caller waits until no new one can be recorded on it: no
// execution changes or appears on a day after its roll-up, so none is
// lost. DailyCounts reads a day with a marker from the roll-ups alone, and
// any other day from the roll-ups plus the executions still there.
//
// Deleting and rolling up are the retention sweep's, one replica at a
// time; a second roll-up of a day would be refused by the primary key.

// Rollup is one row of xtimer_rollups: Count final executions of TaskCode
// had Status on Day.
//
// Day is a Unix day number, the days since 1970-01-01 UTC (see DayOf),
// rather than a DATE or a "2026-11-30" string: like Slot.Minute it is plain
// integer arithmetic on run_time in every engine, it sorts and ranges as a
// number, and no driver reads it in the session's time zone. The console
// writes it as a date.
type Rollup struct {
	App      string `gorm:"column:app;size:64;primaryKey;autoIncrement:false"`
	TaskCode string `gorm:"column:task_code;size:128;primaryKey;autoIncrement:false"`
	Day      int64  `gorm:"column:day;primaryKey;autoIncrement:false"`
	Status   string `gorm:"column:status;size:16;primaryKey;autoIncrement:false"`
	Count    int64  `gorm:"column:count;not null;default:0"`
}

// TableName is xtimer_rollups, whatever the caller's naming strategy.
func (Rollup) TableName() string { return "xtimer_rollups" }

// WithRollups sets whether deleting final executions of a day not rolled
// up yet adds them to the day's counts in xtimer_rollups. Defaults to true;
// the Scheduler turns it off with Options.NoRollups.
func WithRollups(on bool) Option { return func(s *Store) { s.noRollups = !on } }

// dayMs is the length of a UTC day: Unix time has no leap seconds.
const dayMs = 24 * 3600 * 1000

// DayOf returns the Unix day number of an instant in Unix milliseconds,
// the unit of Rollup.Day.
func DayOf(ms int64) int64 {
	d := ms / dayMs
	if ms < 0 && ms%dayMs != 0 {
		d-- // floor, not truncation, before 1970
	}
	return d
}

// DayStartMs returns the first instant of a Unix day, in Unix milliseconds.
func DayStartMs(day int64) int64 { return day * dayMs }

// nonFinalStatuses are the statuses an execution still leaves.
var nonFinalStatuses = []string{StatusScheduled, StatusRunning, StatusRetrying}

// ErrDayNotFinal is returned, wrapped, by RollupDay for a day some of whose
// executions are not final yet.
var ErrDayNotFinal = errors.New("store: executions of the day are not all final")

// RollupDay rolls up one day of app, [DayStartMs(day), DayStartMs(day+1)):
// in one transaction, it adds the day's executions by task and status to
// the counts of those deleted earlier and writes the day's marker. It
// returns how many executions it counted in xtimer_executions.
//
// A day already rolled up is left as it is, and RollupDay returns the
// count of that first roll-up: calling it again changes nothing. A day with
// executions that are not final is refused with ErrDayNotFinal. The caller
// must not roll up a day on which an execution may still be recorded (the
// catch-up records fires up to CatchUpHorizon back): it would never be
// counted.
func (s *Store) RollupDay(ctx context.Context, app string, day int64) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	from, to := DayStartMs(day), DayStartMs(day+1)
	fail := func(err error) (int64, error) {
		return 0, fmt.Errorf("store: roll up day %d of %q: %w", day, app, err)
	}
	db := s.db.WithContext(ctx)
	if n, ok, err := marker(db, app, day); err != nil || ok {
		if err != nil {
			return fail(err)
		}
		return n, nil
	}
	// The few live rows are found along xtimer_executions_status.
	var live int64
	if err := db.Raw("SELECT COUNT(*) FROM xtimer_executions WHERE app = ? AND status IN ? AND run_time >= ? AND run_time < ?",
		app, nonFinalStatuses, from, to).Scan(&live).Error; err != nil {
		return fail(err)
	}
	if live > 0 {
		return fail(fmt.Errorf("%d not final: %w", live, ErrDayNotFinal))
	}
	// Read outside the transaction: the day's executions no longer change,
	// and only the sweep, which calls this, deletes them.
	var rows []Rollup
	if err := db.Raw("SELECT task_code, status, COUNT(*) AS count FROM xtimer_executions WHERE app = ? AND run_time >= ? AND run_time < ? AND status IN ? GROUP BY task_code, status",
		app, from, to, FinalStatuses).Scan(&rows).Error; err != nil {
		return fail(err)
	}
	var counted int64
	for i := range rows {
		rows[i].App, rows[i].Day = app, day
		counted += rows[i].Count
	}
	slices.SortFunc(rows, compareRollups)
	// The marker first: a second roll-up of the day fails on its primary
	// key before it adds anything, and on SQLite the transaction takes
	// the write lock at once instead of upgrading a read.
	err := s.tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&Rollup{App: app, Day: day, Count: counted}).Error; err != nil {
			return err
		}
		return s.addCounts(tx, rows)
	})
	if err != nil {
		return fail(err)
	}
	return counted, nil
}

// marker reads the marker of a day: its count, and whether there is one.
func marker(db *gorm.DB, app string, day int64) (int64, bool, error) {
	var n []int64
	err := db.Raw("SELECT count FROM xtimer_rollups WHERE app = ? AND task_code = '' AND day = ? AND status = ''", app, day).Scan(&n).Error
	if err != nil || len(n) == 0 {
		return 0, false, err
	}
	return n[0], true, nil
}

// addCounts adds rows' counts to xtimer_rollups, creating the rows that do
// not exist.
func (s *Store) addCounts(tx *gorm.DB, rows []Rollup) error {
	if len(rows) == 0 {
		return nil
	}
	sum := gorm.Expr("xtimer_rollups.count + excluded.count")
	if s.db.Dialector.Name() == "mysql" {
		sum = gorm.Expr("count + VALUES(count)")
	}
	return tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "app"}, {Name: "task_code"}, {Name: "day"}, {Name: "status"}},
		DoUpdates: clause.Set{{Column: clause.Column{Name: "count"}, Value: sum}},
	}).CreateInBatches(rows, insertChunk).Error
}

// deletedRow is what deleteFinal learns of a row it deletes.
type deletedRow struct {
	ID       int64
	TaskCode string
	RunTime  int64
	Status   string
}

// countDeleted adds rows, just deleted in tx, to the counts of their days
// that are not rolled up yet.
func (s *Store) countDeleted(tx *gorm.DB, app string, rows []deletedRow) error {
	if s.noRollups || len(rows) == 0 {
		return nil
	}
	sums := map[Rollup]int64{}
	days := map[int64]bool{}
	for _, r := range rows {
		day := DayOf(r.RunTime)
		days[day] = true
		sums[Rollup{App: app, TaskCode: r.TaskCode, Day: day, Status: r.Status}]++
	}
	var rolled []int64
	if err := tx.Raw("SELECT day FROM xtimer_rollups WHERE app = ? AND task_code = '' AND status = '' AND day IN ?",
		app, slices.Collect(maps.Keys(days))).Scan(&rolled).Error; err != nil {
		return err
	}
	var add []Rollup
	for k, n := range sums {
		if !slices.Contains(rolled, k.Day) {
			k.Count = n
			add = append(add, k)
		}
	}
	// One order for every batch: two transactions never lock the same
	// rows in opposite orders.
	slices.SortFunc(add, compareRollups)
	return s.addCounts(tx, add)
}

func compareRollups(a, b Rollup) int {
	return cmp.Or(cmp.Compare(a.TaskCode, b.TaskCode), cmp.Compare(a.Day, b.Day), cmp.Compare(a.Status, b.Status))
}

// RolledUpDays returns the days from fromDay to toDay (inclusive) that
// RollupDay rolled up for app, in order.
func (s *Store) RolledUpDays(ctx context.Context, app string, fromDay, toDay int64) ([]int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	days, err := rolledUpDays(s.db.WithContext(ctx), app, fromDay, toDay)
	if err != nil {
		return nil, fmt.Errorf("store: list rolled-up days %d-%d of %q: %w", fromDay, toDay, app, err)
	}
	return days, nil
}

func rolledUpDays(db *gorm.DB, app string, fromDay, toDay int64) ([]int64, error) {
	days := []int64{}
	err := db.Raw("SELECT day FROM xtimer_rollups WHERE app = ? AND task_code = '' AND day >= ? AND day <= ? AND status = '' ORDER BY day",
		app, fromDay, toDay).Scan(&days).Error
	return days, err
}

// NextExecutionDay returns the first day, fromDay or later, on which app
// has an execution of any status; ok is false when there is none. It is one
// probe of xtimer_executions_time.
func (s *Store) NextExecutionDay(ctx context.Context, app string, fromDay int64) (day int64, ok bool, err error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var rt []int64
	err = s.db.WithContext(ctx).Raw("SELECT run_time FROM xtimer_executions WHERE app = ? AND run_time >= ? ORDER BY run_time LIMIT 1",
		app, DayStartMs(fromDay)).Scan(&rt).Error
	if err != nil {
		return 0, false, fmt.Errorf("store: find the next day of %q with executions from day %d: %w", app, fromDay, err)
	}
	if len(rt) == 0 {
		return 0, false, nil
	}
	return DayOf(rt[0]), true, nil
}

// DailyCounts returns, for the days from fromDay to toDay (inclusive), how
// many final executions of one task had each status, as Rollup rows in
// (day, status) order; pairs with none are absent. A rolled-up day is read
// from xtimer_rollups alone; any other day adds the executions still in
// xtimer_executions, read along xtimer_executions_shard, to the counts of
// those deleted. It reads in one repeatable-read transaction, so that a
// batch of the sweep never shows twice or not at all.
func (s *Store) DailyCounts(ctx context.Context, app, code string, fromDay, toDay int64) ([]Rollup, error) {
	if fromDay > toDay || toDay-fromDay > 366 {
		return nil, fmt.Errorf("store: daily counts of task %q: days %d to %d: want at most 367 days, in order", code, fromDay, toDay)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var opts []*sql.TxOptions
	if s.db.Dialector.Name() != "sqlite" { // SQLite's transactions are serializable already
		opts = append(opts, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	}
	sums := map[Rollup]int64{}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		rolled, err := rolledUpDays(tx, app, fromDay, toDay)
		if err != nil {
			return err
		}
		var rows []Rollup
		if err := tx.Where("app = ? AND task_code = ? AND day >= ? AND day <= ?", app, code, fromDay, toDay).Find(&rows).Error; err != nil {
			return err
		}
		for _, r := range rows {
			sums[Rollup{Day: r.Day, Status: r.Status}] += r.Count
		}
		div := "/" // bigint / bigint is integer division in PostgreSQL and SQLite
		if s.db.Dialector.Name() == "mysql" {
			div = "DIV"
		}
		// Each run of days without a roll-up, counted live: nearly always
		// the last one or two days only.
		for day := fromDay; day <= toDay; day++ {
			if slices.Contains(rolled, day) {
				continue
			}
			last := day
			for last < toDay && !slices.Contains(rolled, last+1) {
				last++
			}
			var live []Rollup
			err := tx.Raw("SELECT run_time "+div+" ? AS day, status, COUNT(*) AS count FROM xtimer_executions"+
				" WHERE app = ? AND task_code = ? AND run_time >= ? AND run_time < ? AND status IN ? GROUP BY 1, status",
				dayMs, app, code, DayStartMs(day), DayStartMs(last+1), FinalStatuses).Scan(&live).Error
			if err != nil {
				return err
			}
			for _, r := range live {
				sums[Rollup{Day: r.Day, Status: r.Status}] += r.Count
			}
			day = last
		}
		return nil
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: daily counts of task %q: %w", code, err)
	}
	out := make([]Rollup, 0, len(sums))
	for k, n := range sums {
		if n > 0 {
			out = append(out, Rollup{App: app, TaskCode: code, Day: k.Day, Status: k.Status, Count: n})
		}
	}
	slices.SortFunc(out, compareRollups)
	return out, nil
}
