package executor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSignMatchesAnIndependentHMAC(t *testing.T) {
	t.Parallel()
	// Computed with Python's hmac module: hmac.new(b"whsec_test",
	// b'1700000000.{"a":1}', hashlib.sha256).hexdigest().
	require.Equal(t, "v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789",
		Sign("whsec_test", 1700000000, []byte(`{"a":1}`)))
}

func TestVerifySignatureChecksSecretBodyAndAge(t *testing.T) {
	t.Parallel()
	const ts = 1700000000
	now := time.Unix(ts, 0).Add(30 * time.Second)
	body := []byte(`{"a":1}`)
	sig := Sign("s3cret", ts, body)

	require.True(t, VerifySignature("s3cret", sig, ts, body, now, time.Minute))
	require.True(t, VerifySignature("s3cret", "v1=00ff,"+sig, ts, body, now, time.Minute), "one of several signatures is enough")
	require.True(t, VerifySignature("s3cret", sig, ts, body, time.Unix(ts, 0).Add(-4*time.Minute), 0), "a clock behind by less than the default tolerance")

	require.False(t, VerifySignature("wrong", sig, ts, body, now, time.Minute), "wrong secret")
	require.False(t, VerifySignature("s3cret", sig, ts, []byte(`{"a":2}`), now, time.Minute), "changed body")
	require.False(t, VerifySignature("s3cret", sig, ts+1, body, now, time.Minute), "changed timestamp")
	require.False(t, VerifySignature("s3cret", sig, ts, body, time.Unix(ts, 0).Add(2*time.Minute), time.Minute), "old timestamp")
	require.False(t, VerifySignature("s3cret", sig, ts, body, time.Unix(ts, 0).Add(6*time.Minute), 0), "older than the default tolerance")
	require.False(t, VerifySignature("s3cret", sig[3:], ts, body, now, time.Minute), "no v1= prefix")
	require.False(t, VerifySignature("s3cret", "v1=zz", ts, body, now, time.Minute), "not hex")
	require.False(t, VerifySignature("s3cret", "", ts, body, now, time.Minute), "empty")
}
