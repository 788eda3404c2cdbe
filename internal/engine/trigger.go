package engine

// Manual is what a manual run is triggered with (Engine.TriggerWith): the
// root's TriggerOptions, checked.
type Manual struct {
	// Params replace the task's parameters for the run ("" keeps them):
	// JSON for a Go task, the body of an HTTP task's request.
	Params string
	// Note says why the run was triggered.
	Note string
	// Check, when set, refuses Params for the task, given its HTTP
	// callback (nil for a Go task), before anything is recorded.
	Check func(http *HTTPSpec) error
}
