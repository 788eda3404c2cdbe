package admin

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fuzzBodies are the JSON bodies the API decodes, each with the check its
// handler runs on a decoded body before anything reaches the scheduler.
var fuzzBodies = []struct {
	name  string
	check func([]byte) (any, error)
}{
	{"TaskEdit", func(b []byte) (any, error) {
		var e TaskEdit
		return &e, decodeThen(b, &e, func() error { _ = e.task(); _ = e.secrets(); return e.scrub(e.check()) })
	}},
	{"ScheduleEdit", func(b []byte) (any, error) {
		var e ScheduleEdit
		return &e, decodeThen(b, &e, func() error { return checkDialect(e.Dialect) })
	}},
	{"OptionsEdit", func(b []byte) (any, error) {
		var e OptionsEdit
		return &e, decodeThen(b, &e, func() error { _, err := e.overrides(); return err })
	}},
	{"TriggerBody", func(b []byte) (any, error) {
		var e TriggerBody
		return &e, decodeThen(b, &e, func() error { _, err := e.options(); return err })
	}},
	{"BackfillRange", func(b []byte) (any, error) {
		var e BackfillRange
		return &e, decodeThen(b, &e, func() error { _, _, err := backfillRange(e.From, e.To); return err })
	}},
	{"PauseBody", func(b []byte) (any, error) {
		var e PauseBody
		return &e, decodeThen(b, &e, func() error { return nil })
	}},
	{"CalendarEdit", func(b []byte) (any, error) {
		var e CalendarEdit
		return &e, decodeThen(b, &e, func() error { return nil })
	}},
}

// decodeThen decodes body as a console request with a JSON body, bounded
// as the console bounds it, then runs check on what it decoded.
func decodeThen(body []byte, v any, check func() error) error {
	r := httptest.NewRequest(http.MethodPost, "/xtimer/api/tasks", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, DefaultMaxBodyBytes)
	if err := decodeBody(r, v); err != nil {
		return err
	}
	return check()
}

// FuzzDecodeBody sends arbitrary bytes as the body of every JSON endpoint:
// the decoder and the checks after it never panic, and every refusal is
// a 4xx API error (or the body-size error, which writeError turns into
// 413), never a 5xx.
func FuzzDecodeBody(f *testing.F) {
	seeds := []string{
		`{}`, `{"code":"a.b","spec":"* * * * *","target":{"method":"POST","url":"https://example.com/x","headers":[{"name":"Authorization","value":"••••••","secret":true}]}}`,
		`{"spec":"0 9 * * 1-5","dialect":"quartz","zone":"Europe/Paris"}`,
		`{"timeout_ms":-1,"max_attempts":1e400,"misfire":"later","params":{"a":[1,2,{"b":null}]}}`,
		`{"params":"{\"region\":\"us\"}","note":"\u0000"}`, `{"from":"2026-01-01T00:00:00Z","to":"1970-01-01"}`,
		`{"days":["2026-12-25","not a day",""]}`, `{"target":{"headers":[{"name":"X\r\nEvil: 1"}]}}`,
		`{"a":{"b":{"c":[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]}}}`, `[]`, `null`, `"x"`, `{} {}`, `{"code":`, "\xff\xfe",
		`{"Code":"CASE.FOLD","CODE":"x"}`, `{"shards":1e9,"broadcast":"yes"}`, `{"end_at":"0000-00-00T00:00:00Z"}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		b := fuzzBodies[int(which)%len(fuzzBodies)]
		_, err := b.check(body)
		if err == nil {
			return
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return
		}
		a := asAPIError(err)
		if a.Status < 400 || a.Status > 499 {
			t.Fatalf("%s %q: status %d (%v), want a 4xx refusal", b.name, body, a.Status, err)
		}
		if strings.TrimSpace(a.Message) == "" {
			t.Fatalf("%s %q: a refusal without a message", b.name, body)
		}
	})
}
