// Package executor runs handlers for xtimer: a bounded pool that starts work
// in the order it was submitted (Pool), one attempt under a timeout with
// panics turned into errors (Call), the retry back-off (Backoff), and the
// HTTP callbacks of HTTP tasks (HTTPCaller: one shared client whose dialer
// refuses link-local and cloud-metadata addresses, and loopback unless
// allowed, after DNS resolution;
// SignWebhook/VerifyWebhook for the Standard Webhooks signature headers, and
// Sign/VerifySignature for the deprecated X-Xtimer-Signature header).
//
// It knows nothing of tasks, rows or replicas: the scheduler decides what to
// run and records what happened; this package only runs it.
package executor
