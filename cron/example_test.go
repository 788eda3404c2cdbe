package cron_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/xtimer-go/xtimer/cron"
)

func ExampleParse() {
	sched, err := cron.Parse("0 9 * * MON-FRI")
	if err != nil {
		panic(err)
	}
	fmt.Println(sched.Describe())
	from := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC) // a Friday
	fmt.Println(sched.Next(from).Format("Mon 2006-01-02 15:04 MST"))

	_, err = cron.Parse("60 * * * *")
	var se *cron.SpecError
	fmt.Println(errors.Is(err, cron.ErrBadSpec), errors.As(err, &se), se.Field)
	fmt.Println(err)
	// Output:
	// at 09:00 on Monday through Friday, UTC
	// Mon 2026-11-30 09:00 UTC
	// true true minute
	// xtimer: spec "60 * * * *": minute field "60": value 60 out of range 0-59
}

func ExampleQuartz() {
	// Quartz numbers the days of the week 1-7 from Sunday: 2-6 is Monday
	// through Friday.
	sched, err := cron.Parse("0 0 12 ? * 2-6", cron.Quartz())
	if err != nil {
		panic(err)
	}
	fmt.Println(sched.Dialect(), sched.Describe())
	// Output:
	// quartz at 12:00 on Monday through Friday, UTC
}

func ExampleIn() {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	sched, err := cron.Parse("30 2 * * *", cron.In(newYork))
	if err != nil {
		panic(err)
	}
	// 02:30 does not exist on 2027-03-14: the fire runs once, at the end
	// of the gap.
	from := time.Date(2027, 3, 12, 12, 0, 0, 0, newYork)
	for _, at := range cron.NextFires(sched, from, 3, time.Time{}) {
		fmt.Println(at.Format("2006-01-02 15:04 MST"))
	}
	// Output:
	// 2027-03-13 02:30 EST
	// 2027-03-14 03:00 EDT
	// 2027-03-15 02:30 EDT
}

func ExampleNextFires() {
	sched, err := cron.Parse("0 0 18 L * ?", cron.Quartz())
	if err != nil {
		panic(err)
	}
	from := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	end := time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC) // fires stop before it
	for _, at := range cron.NextFires(sched, from, 5, end) {
		fmt.Println(at.Format("2006-01-02 15:04"))
	}
	// Output:
	// 2026-11-30 18:00
	// 2026-12-31 18:00
	// 2027-01-31 18:00
}

func ExampleWithDialect() {
	// A dialect and a zone stored as data beside the spec, as a task row
	// keeps them.
	dialect, zone := "quartz", "Asia/Shanghai"
	loc, err := cron.LoadZone(zone)
	if err != nil {
		panic(err)
	}
	sched, err := cron.Parse("0 0 9 ? * MON-FRI", cron.WithDialect(cron.Dialect(dialect)), cron.In(loc))
	if err != nil {
		panic(err)
	}
	fmt.Println(sched.Describe())
	// Output:
	// at 09:00 on Monday through Friday, Asia/Shanghai
}

func ExampleLoadZone() {
	_, err := cron.LoadZone("Local")
	fmt.Println(err)
	_, err = cron.LoadZone("Mars/Base")
	fmt.Println(errors.Is(err, cron.ErrBadSpec))
	// Output:
	// xtimer: time zone field "Local": the machine's local zone differs between replicas; name a zone such as "Asia/Shanghai"
	// true
}

func ExampleSchedule_Describe() {
	for _, spec := range []string{"*/15 * * * *", "0 30 2 1 * *", "@every 90s", "@weekly", "0 0 9 * * MON#1"} {
		sched, err := cron.Parse(spec)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-16s %s\n", spec, sched.Describe())
	}
	// Output:
	// */15 * * * *     every 15 minutes, UTC
	// 0 30 2 1 * *     at 02:30 on day 1 of the month, UTC
	// @every 90s       every 1m30s (counted from 1970-01-01 00:00 UTC), UTC
	// @weekly          at 00:00 on Sunday, UTC
	// 0 0 9 * * MON#1  at 09:00 on the first Monday of the month, UTC
}

func ExampleSchedule_Next() {
	// Seconds first: every 20 seconds during the ninth hour, on weekdays.
	sched, err := cron.Parse("*/20 * 9 * * 1-5")
	if err != nil {
		panic(err)
	}
	at := time.Date(2026, 12, 4, 9, 59, 30, 0, time.UTC) // a Friday
	for range 3 {
		at = sched.Next(at)
		fmt.Println(at.Format("Mon 15:04:05"))
	}
	// Output:
	// Fri 09:59:40
	// Mon 09:00:00
	// Mon 09:00:20
}
