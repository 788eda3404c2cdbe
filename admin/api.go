package admin

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xtimer-go/xtimer"
	"github.com/xtimer-go/xtimer/internal/store"
)

// Machine-readable error codes of the JSON API, each with one HTTP status.
const (
	codeInvalid         = "invalid_argument"       // 400: a field is wrong; Field and Value name it
	codeUnknownField    = "unknown_field"          // 400: the JSON body has a field the endpoint does not take
	codeBadJSON         = "bad_json"               // 400: the body is not the JSON object the endpoint takes
	codeUnauthenticated = "unauthenticated"        // 401
	codeForbidden       = "forbidden"              // 403: not allowed, or not loopback without an authorizer
	codeReadOnly        = "read_only"              // 403: Options.ReadOnly
	codeCrossOrigin     = "cross_origin"           // 403: a state-changing request from another site
	codeNotFound        = "not_found"              // 404: unknown task, execution or path
	codeMethod          = "method_not_allowed"     // 405
	codeConflict        = "conflict"               // 409: the request does not fit the state (another app's task, stopped scheduler)
	codeTooLarge        = "body_too_large"         // 413
	codeMediaType       = "unsupported_media_type" // 415: a state-changing request without a JSON body
	codeInternal        = "internal"               // 500
	codeUnavailable     = "unavailable"            // 503: the database did not answer
)

// apiError is the one error shape of the API:
//
//	{"error": {"code": "invalid_argument", "message": "...", "field": "spec", "value": "0 60 * * *"}}
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Value   string `json:"value,omitempty"`
	// SpecField names the part of a cron expression that is wrong
	// ("minute", "day-of-week") when Field is spec.
	SpecField string `json:"spec_field,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

func apiErrorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// fieldError is a 400 naming the field and the value that is wrong.
func fieldError(field, value, reason string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: field, Value: value,
		Message: fmt.Sprintf("%s %q: %s", field, value, reason)}
}

var errCrossOrigin = apiErrorf(http.StatusForbidden, codeCrossOrigin,
	"cross-origin request refused: state-changing requests must come from the console's own pages (or an origin in admin.Options.TrustedOrigins)")

// envelope is the one success shape: {"data": ..., "next": "cursor"}.
type envelope struct {
	Data any    `json:"data"`
	Next string `json:"next,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

func writeData(w http.ResponseWriter, data any, next string) {
	writeJSON(w, http.StatusOK, envelope{Data: data, Next: next})
}

// writeError answers with the API's error shape, or with an HTML page for
// a browser asking for a page.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := asAPIError(err)
	if wantsHTML(r) {
		renderErrorPage(w, r, e)
		return
	}
	writeJSON(w, e.Status, struct {
		Error *apiError `json:"error"`
	}{e})
}

// asAPIError maps the errors of the scheduler and the store to the API's
// codes; anything unknown is a 500 whose message is kept (it names what
// failed, and the console is for operators).
func asAPIError(err error) *apiError {
	var e *apiError
	var spec *xtimer.SpecError
	var field *xtimer.FieldError
	var tooBig *http.MaxBytesError
	var backfill *xtimer.BackfillError
	var options *xtimer.TaskOverridesError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &options):
		name, value := bodyField(cmp.Or(optionsField[options.Field], options.Field), options.Value)
		return fieldError(name, value, options.Reason)
	case errors.Is(err, xtimer.ErrHTTPTaskOptions):
		return apiErrorf(http.StatusConflict, codeConflict, "%s", err.Error())
	case errors.As(err, &backfill):
		return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: backfill.Field, Value: backfill.Value, Message: err.Error()}
	case errors.As(err, &spec):
		msg := err.Error()
		if errors.As(err, &field) {
			msg = spec.Error() // the schedule form shows the spec's own words
		}
		e := &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: "spec", Value: spec.Spec, SpecField: spec.Field, Message: msg}
		switch spec.Field {
		case "time zone":
			e.Field, e.Value, e.SpecField = "zone", spec.Value, ""
		case "spec": // the spec as a whole (too long), not one of its fields
			e.Value, e.SpecField = cmp.Or(spec.Spec, spec.Value), ""
		}
		return e
	case errors.As(err, &field):
		name, value := bodyField(field.Field, field.Value)
		return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: name, Value: value, Message: err.Error()}
	case errors.As(err, &tooBig):
		return apiErrorf(http.StatusRequestEntityTooLarge, codeTooLarge, "request body over %d bytes", tooBig.Limit)
	case errors.Is(err, xtimer.ErrTaskNotFound), errors.Is(err, store.ErrNotFound):
		return apiErrorf(http.StatusNotFound, codeNotFound, "%s", err.Error())
	case errors.Is(err, xtimer.ErrNotRetryable):
		return apiErrorf(http.StatusConflict, codeConflict, "%s", err.Error())
	case errors.Is(err, xtimer.ErrNotHTTPTask):
		return apiErrorf(http.StatusConflict, codeConflict, "%s: a Go task is defined in code, where it is changed or removed", err.Error())
	case errors.Is(err, xtimer.ErrDuplicateTask), errors.Is(err, xtimer.ErrNotStarted), errors.Is(err, xtimer.ErrStopped):
		return apiErrorf(http.StatusConflict, codeConflict, "%s", err.Error())
	}
	return apiErrorf(http.StatusInternalServerError, codeInternal, "%s", err.Error())
}

// bodyField names a field of the scheduler's HTTPTask, and its value, as
// TaskEdit, the body, has them: its durations are milliseconds there.
func bodyField(name, value string) (string, string) {
	switch name {
	case "timeout", "backoff_base", "backoff_max", "jitter", "misfire_window":
		if d, err := time.ParseDuration(value); err == nil {
			value = strconv.FormatInt(d.Milliseconds(), 10)
		}
		return name + "_ms", value
	}
	return name, value
}

// decodeBody reads a state-changing request's JSON body into v: the body
// must be application/json (a cross-site HTML form cannot send that), one
// object, with no field v does not have.
func decodeBody(r *http.Request, v any) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return apiErrorf(http.StatusUnsupportedMediaType, codeMediaType,
			"Content-Type %q: state-changing requests take a JSON body with Content-Type application/json (send {} when there is nothing to say)", r.Header.Get("Content-Type"))
	}
	var tooBig *http.MaxBytesError
	var raw json.RawMessage
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&raw); err != nil {
		switch {
		case errors.As(err, &tooBig):
			return err
		case errors.Is(err, io.EOF):
			return apiErrorf(http.StatusBadRequest, codeBadJSON, "empty body: send a JSON object ({} when there is nothing to say)")
		}
		return apiErrorf(http.StatusBadRequest, codeBadJSON, "body is not a JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if errors.As(err, &tooBig) {
			return err
		}
		return apiErrorf(http.StatusBadRequest, codeBadJSON, "body has data after its JSON object")
	}
	strict := json.NewDecoder(bytes.NewReader(raw))
	strict.DisallowUnknownFields()
	if err := strict.Decode(v); err != nil {
		// The decoder reports the first problem in the body: a value of
		// the wrong type (typed), or a key v has no field for, which it
		// reports as text only; unknownField finds that key in the body.
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			if typeErr.Field == "" {
				return apiErrorf(http.StatusBadRequest, codeBadJSON, "body is not a JSON object: %v", err)
			}
			return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: typeErr.Field,
				Message: fmt.Sprintf("field %q: want a JSON %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)}
		}
		if name := unknownField(raw, reflect.TypeOf(v)); name != "" {
			return &apiError{Status: http.StatusBadRequest, Code: codeUnknownField, Field: name,
				Message: fmt.Sprintf("unknown field %q in the JSON body", name)}
		}
		return apiErrorf(http.StatusBadRequest, codeBadJSON, "body is not a JSON object: %v", err)
	}
	return nil
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// unknownField is the first key in the JSON value data, in the body's
// order, that type t has no field for, at any depth: the key a Decoder
// with DisallowUnknownFields refuses. It is "" when there is none.
func unknownField(data []byte, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return "" // t reads its own JSON
	}
	switch t.Kind() {
	case reflect.Struct:
		return eachValue(data, '{', func(key string, value []byte) string {
			f, ok := jsonField(t, key)
			if !ok {
				return key
			}
			return unknownField(value, f.Type)
		})
	case reflect.Map:
		return eachValue(data, '{', func(_ string, value []byte) string { return unknownField(value, t.Elem()) })
	case reflect.Slice, reflect.Array:
		return eachValue(data, '[', func(_ string, value []byte) string { return unknownField(value, t.Elem()) })
	}
	return ""
}

// eachValue calls f on each member of the JSON object data (open '{') or
// each element of the array data (open '['), in order, until f returns
// something other than "", and returns that. Data of another kind calls f
// on nothing.
func eachValue(data []byte, open json.Delim, f func(key string, value []byte) string) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != open {
		return ""
	}
	for dec.More() {
		var key string
		if open == '{' {
			tok, err := dec.Token()
			if err != nil {
				return ""
			}
			key, _ = tok.(string)
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return ""
		}
		if found := f(key, value); found != "" {
			return found
		}
	}
	return ""
}

// jsonField is the field of struct type t that encoding/json decodes the
// key into: the field its name is, else one whose name matches but for case.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	var folded reflect.StructField
	found := false
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case tag == "-":
			continue
		case f.Anonymous && name == "" && ft.Kind() == reflect.Struct:
			continue // its fields are promoted: VisibleFields lists them
		case !f.IsExported():
			continue
		}
		if name == "" {
			name = f.Name
		}
		switch {
		case name == key:
			return f, true
		case !found && strings.EqualFold(name, key):
			folded, found = f, true
		}
	}
	return folded, found
}

// query reads the parameters of a listing, refusing unknown ones so that a
// typo (?stauts=failed) is an error, not a silently unfiltered list.
type query struct {
	v   map[string][]string
	err error
	// p is the request's principal, whose apps an app parameter must name.
	p Principal
}

func newQuery(r *http.Request, allowed ...string) *query {
	q := &query{v: r.URL.Query(), p: principalOf(r.Context())}
	for name := range q.v {
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		if !ok && q.err == nil {
			q.err = fieldError(name, q.get(name), "unknown query parameter; this endpoint takes "+strings.Join(allowed, ", "))
		}
	}
	return q
}

func (q *query) get(name string) string {
	if vs := q.v[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func (q *query) str(name string, max int) string {
	s := q.get(name)
	if q.err == nil {
		if len(s) > max {
			q.err = fieldError(name, s, fmt.Sprintf("longer than %d bytes", max))
		} else if err := checkText(name, s); err != nil {
			q.err = err
		}
	}
	return s
}

// checkText refuses text no database can compare (invalid UTF-8, NUL
// bytes) as bad input rather than let the store fail with a 500.
func checkText(name, s string) error {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return fieldError(name, s, "want UTF-8 text without NUL bytes")
	}
	return nil
}

// oneOf reads a parameter that must be empty or one of values.
func (q *query) oneOf(name string, values ...string) string {
	s := q.get(name)
	if s == "" {
		return ""
	}
	for _, v := range values {
		if s == v {
			return s
		}
	}
	if q.err == nil {
		q.err = fieldError(name, s, "want one of "+strings.Join(values, ", "))
	}
	return ""
}

func (q *query) intIn(name string, def, lo, hi int) int {
	s := q.get(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		if q.err == nil {
			q.err = fieldError(name, s, fmt.Sprintf("want a whole number from %d to %d", lo, hi))
		}
		return def
	}
	return n
}

// instant reads a time as parseInstant does, in loc; 0 when empty.
func (q *query) instant(name string, loc *time.Location) int64 {
	ms, err := parseInstant(name, q.get(name), loc)
	if err != nil && q.err == nil {
		q.err = err
	}
	return ms
}

func (q *query) cursor(name string) store.Cursor {
	s := q.get(name)
	c, ok := store.ParseCursor(s)
	if !ok && q.err == nil {
		q.err = fieldError(name, s, `want the "next" value of the previous page`)
	}
	return c
}
