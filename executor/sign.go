package executor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultSignatureTolerance is the timestamp tolerance VerifySignature uses
// when given none.
const DefaultSignatureTolerance = 5 * time.Minute

// Sign returns "v1=" and the hex HMAC-SHA256, keyed with secret, of the
// decimal timestamp, a '.', and body: the value of X-Xtimer-Signature for a
// request sent at timestamp (Unix seconds, X-Xtimer-Timestamp).
func Sign(secret string, timestamp int64, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifySignature reports whether signature (an X-Xtimer-Signature value)
// signs timestamp and body with secret, compared in constant time, and
// timestamp is within tolerance of now, either way. signature may list
// several comma-separated "v1=" values (as during a secret rotation); one
// match is enough. tolerance <= 0 means DefaultSignatureTolerance.
func VerifySignature(secret, signature string, timestamp int64, body []byte, now time.Time, tolerance time.Duration) bool {
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	age := now.Sub(time.Unix(timestamp, 0))
	if age > tolerance || age < -tolerance {
		return false
	}
	want := mac(secret, timestamp, body)
	ok := false
	for part := range strings.SplitSeq(signature, ",") {
		h, found := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !found {
			continue
		}
		got, err := hex.DecodeString(h)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			ok = true
		}
	}
	return ok
}

// Errors of VerifyWebhook, wrapped with the detail; decide with errors.Is.
var (
	// ErrWebhookHeader: a Standard Webhooks header is missing or malformed.
	ErrWebhookHeader = errors.New("xtimer: webhook header missing or malformed")
	// ErrWebhookTimestamp: webhook-timestamp is further from now than the
	// tolerance, in the past (a replay) or in the future.
	ErrWebhookTimestamp = errors.New("xtimer: webhook timestamp outside tolerance")
	// ErrWebhookSignature: no signature in webhook-signature matches.
	ErrWebhookSignature = errors.New("xtimer: no webhook signature matches")
	// ErrWebhookSecret: the secret is empty, or starts with "whsec_" and
	// the rest is not standard base64.
	ErrWebhookSecret = errors.New("xtimer: bad webhook secret")
)

// Standard Webhooks headers (standardwebhooks.com), canonical as net/http
// writes them. They equal xtimer.HeaderWebhook*.
const (
	headerWebhookID        = "Webhook-Id"
	headerWebhookTimestamp = "Webhook-Timestamp"
	headerWebhookSignature = "Webhook-Signature"
)

// webhookKey is the HMAC key of a Standard Webhooks secret: the base64
// decoding of what follows "whsec_", or the raw bytes of a secret without
// that prefix.
func webhookKey(secret string) ([]byte, error) {
	if secret == "" {
		return nil, fmt.Errorf("%w: empty", ErrWebhookSecret)
	}
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("%w: the part after whsec_ is not standard base64", ErrWebhookSecret)
	}
	return key, nil
}

func webhookMAC(key []byte, id string, timestamp int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SignWebhook returns the webhook-signature value, "v1," and the standard
// base64 HMAC-SHA256 of id, '.', the decimal timestamp (Unix seconds,
// webhook-timestamp), '.', and body, keyed as Standard Webhooks says: a
// "whsec_" secret by the base64 decoding of its rest, any other by its raw
// bytes. The error wraps ErrWebhookSecret.
func SignWebhook(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := webhookKey(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(webhookMAC(key, id, timestamp, body)), nil
}

// VerifyWebhook checks a request signed per Standard Webhooks: h carries
// webhook-id, webhook-timestamp and webhook-signature, the timestamp is
// within tolerance of now either way (tolerance <= 0 means
// DefaultSignatureTolerance, 5 minutes), and one of the space-separated
// signatures is the "v1," signature of the id, timestamp and body with
// secret, compared in constant time. Several signatures are how a sender
// rotates secrets: one match is enough; entries of other versions ("v1a,")
// are skipped. A nil error is the only success; the error wraps
// ErrWebhookHeader, ErrWebhookTimestamp, ErrWebhookSignature or
// ErrWebhookSecret and names what was wrong. Receivers deduplicate on
// webhook-id, which is the same on every attempt.
func VerifyWebhook(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := webhookKey(secret)
	if err != nil {
		return err
	}
	id, ts, sigs := h.Get(headerWebhookID), h.Get(headerWebhookTimestamp), h.Get(headerWebhookSignature)
	for _, m := range []struct{ name, value string }{{headerWebhookID, id}, {headerWebhookTimestamp, ts}, {headerWebhookSignature, sigs}} {
		if m.value == "" {
			return fmt.Errorf("%w: %s is missing", ErrWebhookHeader, m.name)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not Unix seconds", ErrWebhookHeader, headerWebhookTimestamp, ts)
	}
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	if age := now.Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: %s %d is %v from now, more than %v", ErrWebhookTimestamp, headerWebhookTimestamp, sec, age.Round(time.Second), tolerance)
	}
	want := webhookMAC(key, id, sec, body)
	v1, malformed := 0, 0
	for _, entry := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok {
			malformed++
			continue
		}
		if version != "v1" {
			continue
		}
		v1++
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			malformed++
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	switch {
	case malformed > 0:
		return fmt.Errorf("%w: %s has %d malformed entries (want v1,<base64>) and no match", ErrWebhookSignature, headerWebhookSignature, malformed)
	case v1 == 0:
		return fmt.Errorf("%w: %s has no v1 signature", ErrWebhookSignature, headerWebhookSignature)
	}
	return fmt.Errorf("%w: %d v1 signatures, none by this secret over this id, timestamp and body", ErrWebhookSignature, v1)
}
