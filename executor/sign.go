package executor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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
