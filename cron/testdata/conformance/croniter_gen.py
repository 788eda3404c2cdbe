"""croniter_gen writes the default-dialect conformance table (cron.jsonl) from
corpus_cron.txt, using the real croniter. Run it through generate.sh, which
pins the versions; the Go test only reads the output.

The corpus format is QuartzGen.java's (see its header), plus:

    SPEC => REF    check SPEC (our syntax) against croniter's REF

Without "=>", REF is derived from SPEC mechanically, because croniter writes a
few things differently from us:

  - six fields: we put seconds first (robfig/Spring), croniter puts them last;
  - '?' in day-of-month/day-of-week: we read it as '*', croniter rejects it;
  - 'nL' (last weekday n of the month) in day-of-week: croniter writes 'Ln'.

A case whose REF differs from SPEC carries it in "ref".

An expression croniter rejects yields one error case, whatever the zones and
starts. For an accepted one, "next" lists up to 20 fire times, each
croniter(REF, previous).get_next(datetime), beginning at the start instant
converted to a zoneinfo-aware datetime in the case's zone. "dst" is set when
a UTC-offset transition of the zone lies in (start, last listed fire].
"""

import json
from importlib import metadata
import re
import sys
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from croniter import croniter
from croniter.croniter import CroniterError

FIRES = 20


def words(s):
    out = []
    for w in s.split():
        if w not in out:
            out.append(w)
    return out


def split_line(t, line_no):
    """Returns (spec, ref or None, zones or None, starts or None)."""
    if t.startswith('"'):
        b = []
        i = 1
        while i < len(t) and t[i] != '"':
            c = t[i]
            if c == "\\" and i + 1 < len(t):
                i += 1
                b.append("\t" if t[i] == "t" else t[i])
            else:
                b.append(c)
            i += 1
        if i >= len(t):
            raise ValueError("line %d: unterminated quote" % line_no)
        head, rest = "".join(b), t[i + 1:].strip()
        if rest and not rest.startswith("|"):
            raise ValueError("line %d: text after quoted spec" % line_no)
        ref = None
    else:
        bar = t.find("|")
        head, rest = (t, "") if bar < 0 else (t[:bar].strip(), t[bar:])
        ref = None
        if " => " in head:
            head, ref = (x.strip() for x in head.split(" => ", 1))
    zones = starts = None
    if rest:
        f = rest[1:].split("|")
        if len(f) > 2:
            raise ValueError("line %d: too many '|'" % line_no)
        if f[0].strip():
            zones = words(f[0])
        if len(f) == 2 and f[1].strip():
            starts = words(f[1])
    return head, ref, zones, starts


def to_croniter(spec):
    """Our default-dialect spec in croniter's syntax (see the module doc)."""
    fields = spec.split()
    if len(fields) not in (5, 6) or spec.lstrip().startswith("@"):
        return spec
    if len(fields) == 6:
        fields = fields[1:] + fields[:1]
    for i in (2, 4):
        if fields[i] == "?":
            fields[i] = "*"
    fields[4] = re.sub(r"^([0-7])L$", r"L\1", fields[4])
    out = " ".join(fields)
    # Keep the caller's exact text (blanks, tabs) when nothing changed.
    return spec if out == " ".join(spec.split()) else out


def has_transition(zone, a, b):
    """Whether the UTC offset of zone changes in (a, b]; a, b aware UTC."""
    step = timedelta(hours=12)  # transitions are months apart
    prev = a.astimezone(zone).utcoffset()
    t = a
    while t < b:
        t = min(t + step, b)
        off = t.astimezone(zone).utcoffset()
        if off != prev:
            return True
        prev = off
    return False


def rfc3339(dt):
    s = dt.astimezone(timezone.utc).isoformat()
    return s.replace("+00:00", "Z")


def accepted(case_id, spec, ref, zone_name, start):
    zone = ZoneInfo(zone_name)
    start_utc = datetime.fromisoformat(start.replace("Z", "+00:00"))
    after = start_utc.astimezone(zone)
    nxt = []
    next_error = None
    while len(nxt) < FIRES:
        try:
            after = croniter(ref, after).get_next(datetime)
        except CroniterError as e:
            next_error = "%s: %s" % (type(e).__name__, e)
            break
        nxt.append(after)
    case = {"id": case_id, "spec": spec}
    if ref != spec:
        case["ref"] = ref
    case["tz"] = zone_name
    case["start"] = start
    if nxt and has_transition(zone, start_utc, nxt[-1].astimezone(timezone.utc)):
        case["dst"] = True
    case["next"] = [rfc3339(t) for t in nxt]
    if next_error is not None:
        case["next_error"] = next_error
    return case


def main(corpus, out_path):
    zones, starts = ["UTC"], ["2026-03-07T12:00:00Z"]
    seen, rejected = set(), set()
    rows = []
    with open(corpus, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            t = line.strip()
            if not t or t.startswith("#"):
                continue
            if t.startswith("@tz "):
                zones = words(t[4:])
                for z in zones:
                    ZoneInfo(z)
                continue
            if t.startswith("@start "):
                starts = words(t[7:])
                for s in starts:
                    datetime.fromisoformat(s.replace("Z", "+00:00"))
                continue
            spec, ref, line_zones, line_starts = split_line(t, line_no)
            ref = ref if ref is not None else to_croniter(spec)
            try:
                croniter(ref, datetime(2026, 1, 1, tzinfo=timezone.utc))
            except Exception as e:  # croniter also lets a few plain errors escape
                if spec not in rejected:
                    rejected.add(spec)
                    case = {"id": "c%04d" % (len(rows) + 1), "spec": spec}
                    if ref != spec:
                        case["ref"] = ref
                    case["error"] = "%s: %s" % (type(e).__name__, e)
                    rows.append(case)
                continue
            for z in line_zones or zones:
                ZoneInfo(z)
                for s in line_starts or starts:
                    key = (spec, z, s)
                    if key in seen:
                        continue
                    seen.add(key)
                    rows.append(accepted("c%04d" % (len(rows) + 1), spec, ref, z, s))
    with open(out_path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=True, separators=(",", ":")) + "\n")
    print("croniter_gen: %d cases; croniter %s, python-dateutil %s, python %s"
          % (len(rows), metadata.version("croniter"), metadata.version("python-dateutil"),
             sys.version.split()[0]), file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: croniter_gen.py corpus_cron.txt cron.jsonl", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
