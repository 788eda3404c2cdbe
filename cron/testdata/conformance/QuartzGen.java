// QuartzGen writes the Quartz conformance table (quartz.jsonl) from
// corpus_quartz.txt, using the real org.quartz.CronExpression. Run it through
// generate.sh, which pins the versions; the Go test only reads the output.
//
// Corpus format (shared with croniter_gen.py):
//
//	# comment                 a line whose first non-blank character is '#'
//	@tz ZONE [ZONE...]        zones for the following expressions
//	@start RFC3339 [...]      start instants for the following expressions
//	SPEC                      one case per (zone, start) pair
//	SPEC | ZONES | STARTS     the same, overriding the zones and/or starts
//	"SPEC"                    quoted: \t, \" and \\ are unescaped, blanks kept
//
// An expression the implementation rejects yields one error case, whatever
// the zones and starts. For an accepted one, "next" lists up to 20 fire times,
// each the result of getTimeAfter(previous), beginning at the start instant.
// "dst" is set when a UTC-offset transition of the zone lies in
// (start, last listed fire].

import java.io.BufferedReader;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.ParseException;
import java.time.Instant;
import java.time.ZoneId;
import java.time.zone.ZoneOffsetTransition;
import java.time.zone.ZoneRulesProvider;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Date;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.TimeZone;

import org.quartz.CronExpression;

public final class QuartzGen {
    private static final int FIRES = 20;
    private static final long TIMEOUT_MILLIS = 10_000;

    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: QuartzGen corpus_quartz.txt quartz.jsonl");
            System.exit(2);
        }
        List<String> zones = new ArrayList<>(List.of("UTC"));
        List<String> starts = new ArrayList<>(List.of("2026-03-07T12:00:00Z"));
        Set<String> seen = new HashSet<>();
        Set<String> rejected = new HashSet<>();
        int n = 0;
        try (BufferedReader in = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.UTF_8);
             PrintWriter out = new PrintWriter(Files.newBufferedWriter(Path.of(args[1]), StandardCharsets.UTF_8))) {
            String line;
            int lineNo = 0;
            while ((line = in.readLine()) != null) {
                lineNo++;
                String t = line.strip();
                if (t.isEmpty() || t.startsWith("#")) {
                    continue;
                }
                if (t.startsWith("@tz ")) {
                    zones = words(t.substring(4));
                    zones.forEach(QuartzGen::checkZone);
                    continue;
                }
                if (t.startsWith("@start ")) {
                    starts = words(t.substring(7));
                    starts.forEach(Instant::parse);
                    continue;
                }
                String[] parts = splitLine(t, lineNo);
                String spec = parts[0];
                List<String> lineZones = parts[1] != null ? words(parts[1]) : zones;
                List<String> lineStarts = parts[2] != null ? words(parts[2]) : starts;
                lineZones.forEach(QuartzGen::checkZone);

                String error = null;
                try {
                    new CronExpression(spec);
                } catch (ParseException e) {
                    error = e.getMessage();
                }
                if (error != null) {
                    if (rejected.add(spec)) {
                        n++;
                        out.println("{\"id\":" + json(String.format("q%04d", n)) + ",\"spec\":" + json(spec)
                                + ",\"error\":" + json(error) + "}");
                    }
                    continue;
                }
                for (String zone : lineZones) {
                    for (String start : lineStarts) {
                        if (!seen.add(spec + "\u0000" + zone + "\u0000" + start)) {
                            continue;
                        }
                        n++;
                        out.println(accepted(String.format("q%04d", n), spec, zone, start));
                        out.flush();
                    }
                }
            }
        }
        System.err.println("QuartzGen: " + n + " cases; java " + System.getProperty("java.version")
                + ", tzdb " + ZoneRulesProvider.getVersions("UTC").keySet()
                + ", CronExpression.MAX_YEAR " + CronExpression.MAX_YEAR);
    }

    private static String accepted(String id, String spec, String zone, String start) {
        CronExpression expr;
        try {
            expr = new CronExpression(spec);
        } catch (ParseException e) {
            throw new IllegalStateException(e);
        }
        expr.setTimeZone(TimeZone.getTimeZone(zone));
        Instant startAt = Instant.parse(start);
        List<Instant> next = Collections.synchronizedList(new ArrayList<>());
        String[] nextError = {null};
        // Quartz accepts some expressions it cannot evaluate: 'L' in the
        // minute field leaves the minute set empty (NoSuchElementException),
        // and '0W' makes getTimeAfter loop forever. A watchdog records both.
        Thread worker = new Thread(() -> {
            Date after = Date.from(startAt);
            try {
                while (next.size() < FIRES) {
                    Date d = expr.getTimeAfter(after);
                    if (d == null) {
                        break;
                    }
                    next.add(d.toInstant());
                    after = d;
                }
            } catch (RuntimeException e) {
                nextError[0] = e.toString();
            }
        });
        worker.setDaemon(true);
        worker.start();
        try {
            worker.join(TIMEOUT_MILLIS);
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
        if (worker.isAlive()) {
            stop(worker);
            nextError[0] = "getTimeAfter did not return within " + TIMEOUT_MILLIS / 1000 + "s";
        }
        StringBuilder b = new StringBuilder();
        b.append("{\"id\":").append(json(id));
        b.append(",\"spec\":").append(json(spec));
        b.append(",\"tz\":").append(json(zone));
        b.append(",\"start\":").append(json(start));
        if (!next.isEmpty()) {
            ZoneOffsetTransition tr = ZoneId.of(zone).getRules().nextTransition(startAt);
            if (tr != null && !tr.getInstant().isAfter(next.get(next.size() - 1))) {
                b.append(",\"dst\":true");
            }
        }
        b.append(",\"next\":[");
        for (int i = 0; i < next.size(); i++) {
            if (i > 0) {
                b.append(',');
            }
            b.append(json(next.get(i).toString()));
        }
        b.append(']');
        if (nextError[0] != null) {
            b.append(",\"next_error\":").append(json(nextError[0]));
        }
        b.append('}');
        return b.toString();
    }

    // stop kills a worker stuck inside Quartz; Thread.stop still works on Java 17.
    @SuppressWarnings({"deprecation", "removal"})
    private static void stop(Thread worker) {
        worker.stop();
        try {
            worker.join();
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    // splitLine returns {spec, zones or null, starts or null}.
    private static String[] splitLine(String t, int lineNo) {
        String spec;
        String rest;
        if (t.startsWith("\"")) {
            StringBuilder b = new StringBuilder();
            int i = 1;
            for (; i < t.length() && t.charAt(i) != '"'; i++) {
                char c = t.charAt(i);
                if (c == '\\' && i + 1 < t.length()) {
                    char e = t.charAt(++i);
                    b.append(e == 't' ? '\t' : e);
                } else {
                    b.append(c);
                }
            }
            if (i >= t.length()) {
                throw new IllegalArgumentException("line " + lineNo + ": unterminated quote");
            }
            spec = b.toString();
            rest = t.substring(i + 1).strip();
            if (!rest.isEmpty() && !rest.startsWith("|")) {
                throw new IllegalArgumentException("line " + lineNo + ": text after quoted spec");
            }
        } else {
            int bar = t.indexOf('|');
            spec = bar < 0 ? t : t.substring(0, bar).strip();
            rest = bar < 0 ? "" : t.substring(bar);
        }
        String[] r = {spec, null, null};
        if (!rest.isEmpty()) {
            String[] f = rest.substring(1).split("\\|", -1);
            if (f.length > 2) {
                throw new IllegalArgumentException("line " + lineNo + ": too many '|'");
            }
            if (!f[0].isBlank()) {
                r[1] = f[0];
            }
            if (f.length == 2 && !f[1].isBlank()) {
                r[2] = f[1];
            }
        }
        return r;
    }

    private static List<String> words(String s) {
        List<String> w = new ArrayList<>(new LinkedHashSet<>(List.of(s.strip().split("\\s+"))));
        w.removeIf(String::isEmpty);
        return w;
    }

    // checkZone fails loudly: TimeZone.getTimeZone silently falls back to GMT.
    private static void checkZone(String zone) {
        ZoneId.of(zone);
        if (!TimeZone.getTimeZone(zone).getID().equals(zone)) {
            throw new IllegalArgumentException("unknown zone " + zone);
        }
    }

    private static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\t' -> b.append("\\t");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                default -> {
                    if (c < 0x20 || c > 0x7e) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
