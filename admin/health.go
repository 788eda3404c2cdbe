package admin

import (
	"net/http"
)

// apiHealth serves GET api/health: the scheduler's Health in the envelope,
// 200 when it is OK and 503 when not, with the same body, so that a load
// balancer reads the status and an operator the details. It goes through
// the console's guard like every endpoint: a probe from a loopback address
// needs nothing, a remote one the credentials of Options.Authorize. Query
// parameters are ignored: probes add their own.
func (c *console) apiHealth(w http.ResponseWriter, r *http.Request) {
	h := c.s.Health(r.Context())
	status := http.StatusOK
	if !h.OK {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, envelope{Data: h})
}
