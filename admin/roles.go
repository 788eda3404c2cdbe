package admin

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// Roles and per-app scoping. A Principal has a Role, which says what it
// may do, and Apps, which say whose tasks it may see: every route the
// console mounts names the role it needs (route), and every read that
// names an app, a task or an execution checks the app against the
// principal's (appFor, visible). A request for an app outside the
// principal's answers 404 not_found, as an unknown task or execution
// does, so that a scoped principal cannot tell another app's tasks from
// missing ones; lists (the apps, the app selectors) leave such apps out.

// Role is what a principal may do in the console.
type Role string

const (
	// RoleViewer reads: tasks, executions and their output, attempts,
	// fires, history, replicas and calendars.
	RoleViewer Role = "viewer"
	// RoleOperator reads, and pauses, resumes, runs now, retries and
	// backfills the tasks of its apps.
	RoleOperator Role = "operator"
	// RoleAdmin does everything: besides an operator's actions, it
	// creates, edits and deletes HTTP callback tasks, edits and resets
	// schedules and option overrides, replaces calendars, and runs an
	// HTTP task now with parameters of its own (which replace the body
	// the task signs).
	RoleAdmin Role = "admin"
)

// roles are the roles in order of power.
var roles = []Role{RoleViewer, RoleOperator, RoleAdmin}

// rank orders roles by power; -1 for a name that is no role.
func (r Role) rank() int { return slices.Index(roles, r) }

// Valid reports whether r is one of the Role constants.
func (r Role) Valid() bool { return r.rank() >= 0 }

// Allows reports whether a principal with role r may do what role need
// may: an admin may do everything, an operator what an operator and a
// viewer may, a viewer only read.
func (r Role) Allows(need Role) bool { return r.Valid() && r.rank() >= need.rank() }

// ParseRole reads a role's name, as a tokens file or a flag holds it.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !r.Valid() {
		return "", fmt.Errorf("xtimer/admin: role %q: want %s, %s or %s", s, RoleViewer, RoleOperator, RoleAdmin)
	}
	return r, nil
}

// SeesApp reports whether p may see the tasks of app: every app when
// p.Apps is empty.
func (p Principal) SeesApp(app string) bool {
	return len(p.Apps) == 0 || slices.Contains(p.Apps, app)
}

// errOutOfScope answers a request for an app the principal may not see:
// the same 404 as an unknown task, naming only what the request named.
func errOutOfScope(what string) *apiError {
	return apiErrorf(http.StatusNotFound, codeNotFound, "%s not found", what)
}

// errRole answers a request that needs more than the principal's role.
func errRole(p Principal, need Role, what string) *apiError {
	return apiErrorf(http.StatusForbidden, codeForbidden, "%s needs the %s role: principal %q has the %s role", what, need, p.Name, p.Role)
}

// routeRule is what one method of a route needs: a role, and, for the
// actions and pages that act on the scheduler's own app, that the
// principal may see that app.
type routeRule struct {
	Role Role
	// OwnApp: the handler acts on the scheduler's app (every action, and
	// the forms and previews of actions).
	OwnApp bool
}

// endpoint is one method of a route with its rule and handler.
type endpoint struct {
	rule    routeRule
	handler http.HandlerFunc
}

// read, operate and administer are the rules of most endpoints.
func read(h http.HandlerFunc) endpoint { return endpoint{routeRule{Role: RoleViewer}, h} }
func operate(h http.HandlerFunc) endpoint {
	return endpoint{routeRule{Role: RoleOperator, OwnApp: true}, h}
}
func administer(h http.HandlerFunc) endpoint {
	return endpoint{routeRule{Role: RoleAdmin, OwnApp: true}, h}
}

// mountedRoute is one route as the console mounted it, for the tests
// that check every route has a rule and holds it.
type mountedRoute struct {
	Pattern string // the mux pattern, without the prefix
	Rules   map[string]routeRule
}

// route serves one path with a handler per method, each behind its rule,
// answering other methods with the API's 405 and an Allow header. HEAD
// is GET's.
func (c *console) route(mux *http.ServeMux, path string, byMethod map[string]endpoint) {
	allowed := make([]string, 0, len(byMethod)+1)
	for m := range byMethod {
		allowed = append(allowed, m)
	}
	if get, ok := byMethod["GET"]; ok {
		allowed = append(allowed, "HEAD")
		byMethod["HEAD"] = get
	}
	sort.Strings(allowed)
	rules := make(map[string]routeRule, len(byMethod))
	for m, e := range byMethod {
		rules[m] = e.rule
	}
	c.routes = append(c.routes, mountedRoute{Pattern: strings.TrimPrefix(path, c.prefix), Rules: rules})
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		e, ok := byMethod[r.Method]
		if !ok {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, r, apiErrorf(http.StatusMethodNotAllowed, codeMethod, "method %s not allowed on %s: use %s", r.Method, r.URL.Path, strings.Join(allowed, ", ")))
			return
		}
		p := principalOf(r.Context())
		if e.rule.OwnApp && !p.SeesApp(c.sopts.App) {
			writeError(w, r, errOutOfScope(r.URL.Path))
			return
		}
		if !p.Role.Allows(e.rule.Role) {
			err := errRole(p, e.rule.Role, r.Method+" "+r.URL.Path)
			if c.opts.ReadOnly {
				err.Message += " (admin.Options.ReadOnly makes every principal a viewer)"
			}
			writeError(w, r, err)
			return
		}
		e.handler(w, r)
	})
}

// page is route for a page: GET only, the request marked as a page's.
func (c *console) page(mux *http.ServeMux, path string, rule routeRule, h http.HandlerFunc) {
	c.route(mux, c.prefix+path, map[string]endpoint{"GET": {rule, func(w http.ResponseWriter, r *http.Request) {
		h(w, c.asPage(r))
	}}})
}

// visibleApps is apps less those p may not see.
func visibleApps(p Principal, apps []string) []string {
	out := make([]string, 0, len(apps))
	for _, a := range apps {
		if p.SeesApp(a) {
			out = append(out, a)
		}
	}
	return out
}

// defaultApp is the app a request that names none reads: the scheduler's,
// or the principal's first when it may not see the scheduler's.
func (c *console) defaultApp(p Principal) string {
	if p.SeesApp(c.sopts.App) {
		return c.sopts.App
	}
	return p.Apps[0]
}
