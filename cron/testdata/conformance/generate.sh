#!/bin/sh
# generate.sh rebuilds the conformance tables from the corpora, with the real
# reference implementations:
#
#   quartz.jsonl  <- corpus_quartz.txt  by QuartzGen.java    (org.quartz.CronExpression)
#   cron.jsonl    <- corpus_cron.txt    by croniter_gen.py   (croniter)
#
# CI does not run this: it has neither Java nor croniter. The tables are
# committed and conformance_test.go only reads them. After regenerating, run
#   go test -run Conformance -v ./cron/
# and review every change in the tables and in deliberateDifferences.
#
# Versions the committed tables were generated with (Debian 12 packages):
#
#   libquartz2-java          2.3.2-4      /usr/share/java/quartz2.jar
#   libslf4j-java            1.7.32-1     slf4j-api.jar, slf4j-nop.jar
#   openjdk-17-jre-headless  17.0.15+6-1~deb12u1 (its own tzdb: 2025a)
#   python3-croniter         1.3.5-3      run by /usr/bin/python3 (3.11)
#   python3-dateutil         2.8.2-2
#   tzdata                   2025b-0+deb12u2 (read by Python's zoneinfo)
#
# Two things in the output depend on more than these versions:
#
#   - Quartz's CronExpression.MAX_YEAR is the current year + 100 when the JVM
#     starts (2126 for the committed table, generated in 2026): Quartz finds
#     no fire after it. conformance_test.go's quartzMaxYear must match it.
#   - QuartzGen stops a getTimeAfter call that has not returned after 10s
#     (Quartz loops forever on "0 0 0 0W * ?") and records next_error.
#
# Set FORCE=1 to run with other versions anyway.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

want() { # package version
	got=$(dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo missing)
	if [ "$got" != "$2" ]; then
		echo "generate.sh: $1 is $got, the tables were made with $2" >&2
		[ "${FORCE:-}" = 1 ] || { echo "generate.sh: set FORCE=1 to go on" >&2; exit 1; }
	fi
}
want libquartz2-java 2.3.2-4
want libslf4j-java 1.7.32-1
want openjdk-17-jre-headless 17.0.15+6-1~deb12u1
want python3-croniter 1.3.5-3
want python3-dateutil 2.8.2-2
want tzdata 2025b-0+deb12u2

year=$(date -u +%Y)
if [ "$year" != 2026 ]; then
	echo "generate.sh: Quartz's MAX_YEAR will be $((year + 100)); update quartzMaxYear in conformance_test.go" >&2
fi

jars=/usr/share/java/quartz2.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT

# TZ=UTC: no machine zone can leak into either generator.
javac -d "$classes" -cp "$jars" QuartzGen.java
TZ=UTC java -cp "$classes:$jars" QuartzGen corpus_quartz.txt quartz.jsonl

# /usr/bin/python3: Debian's croniter is installed for the system Python.
TZ=UTC /usr/bin/python3 croniter_gen.py corpus_cron.txt cron.jsonl
