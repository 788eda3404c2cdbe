package executor

import (
	"net/http"
	"strconv"
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

// The example published by the Standard Webhooks spec
// (standardwebhooks.com, "Verifying webhooks").
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func specHeader(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	return h
}

func TestSignWebhookMatchesTheSpecExample(t *testing.T) {
	t.Parallel()
	sig, err := SignWebhook(specSecret, specID, specTimestamp, []byte(specBody))
	require.NoError(t, err)
	require.Equal(t, specSignature, sig)
	require.NoError(t, VerifyWebhook(specSecret, specHeader(specID, specTimestamp, specSignature), []byte(specBody),
		time.Unix(specTimestamp, 0).Add(time.Minute), 0))
}

func TestSignWebhookUsesASecretWithoutPrefixAsRawBytes(t *testing.T) {
	t.Parallel()
	// base64 "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" decoded is the spec's key;
	// the same bytes given raw sign the same.
	key, err := webhookKey(specSecret)
	require.NoError(t, err)
	sig, err := SignWebhook(string(key), specID, specTimestamp, []byte(specBody))
	require.NoError(t, err)
	require.Equal(t, specSignature, sig)
	raw, err := SignWebhook("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", specID, specTimestamp, []byte(specBody))
	require.NoError(t, err)
	require.NotEqual(t, specSignature, raw, "without whsec_ the text itself is the key")
}

func TestVerifyWebhookRefusesEveryAttack(t *testing.T) {
	t.Parallel()
	now := time.Unix(specTimestamp, 0)
	body := []byte(specBody)
	other, err := SignWebhook("whsec_"+"c2Vjb25kLXNlY3JldC0wMTIzNDU2Nzg5", specID, specTimestamp, body)
	require.NoError(t, err)
	old, err := SignWebhook(specSecret, specID, specTimestamp-6*60, body)
	require.NoError(t, err)
	future, err := SignWebhook(specSecret, specID, specTimestamp+6*60, body)
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		secret string
		h      http.Header
		body   string
		want   error
	}{
		{"tampered body", specSecret, specHeader(specID, specTimestamp, specSignature), `{"test": 2432232315}`, ErrWebhookSignature},
		{"tampered id", specSecret, specHeader("msg_another", specTimestamp, specSignature), specBody, ErrWebhookSignature},
		{"tampered timestamp", specSecret, specHeader(specID, specTimestamp+1, specSignature), specBody, ErrWebhookSignature},
		{"replayed old timestamp", specSecret, specHeader(specID, specTimestamp-6*60, old), specBody, ErrWebhookTimestamp},
		{"future timestamp", specSecret, specHeader(specID, specTimestamp+6*60, future), specBody, ErrWebhookTimestamp},
		{"wrong secret", specSecret, specHeader(specID, specTimestamp, other), specBody, ErrWebhookSignature},
		{"missing id", specSecret, specHeader("", specTimestamp, specSignature), specBody, ErrWebhookHeader},
		{"missing signature", specSecret, specHeader(specID, specTimestamp, ""), specBody, ErrWebhookHeader},
		{"timestamp not a number", specSecret, http.Header{"Webhook-Id": {specID}, "Webhook-Timestamp": {"yesterday"}, "Webhook-Signature": {specSignature}}, specBody, ErrWebhookHeader},
		{"bad base64", specSecret, specHeader(specID, specTimestamp, "v1,not*base64"), specBody, ErrWebhookSignature},
		{"no version", specSecret, specHeader(specID, specTimestamp, "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), specBody, ErrWebhookSignature},
		{"another version only", specSecret, specHeader(specID, specTimestamp, "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), specBody, ErrWebhookSignature},
		{"old-style signature", specSecret, specHeader(specID, specTimestamp, Sign(specSecret, specTimestamp, body)), specBody, ErrWebhookSignature},
		{"truncated signature", specSecret, specHeader(specID, specTimestamp, specSignature[:20]), specBody, ErrWebhookSignature},
		{"bad whsec_ key", "whsec_not*base64", specHeader(specID, specTimestamp, specSignature), specBody, ErrWebhookSecret},
		{"empty secret", "", specHeader(specID, specTimestamp, specSignature), specBody, ErrWebhookSecret},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, VerifyWebhook(c.secret, c.h, []byte(c.body), now, time.Minute), c.want)
		})
	}

	err = VerifyWebhook(specSecret, http.Header{}, body, now, 0)
	require.ErrorIs(t, err, ErrWebhookHeader)
	require.ErrorContains(t, err, "Webhook-Id is missing")
}

func TestVerifyWebhookToleranceDefaultsToFiveMinutes(t *testing.T) {
	t.Parallel()
	h := specHeader(specID, specTimestamp, specSignature)
	signed := time.Unix(specTimestamp, 0)
	require.NoError(t, VerifyWebhook(specSecret, h, []byte(specBody), signed.Add(4*time.Minute), 0))
	require.NoError(t, VerifyWebhook(specSecret, h, []byte(specBody), signed.Add(-4*time.Minute), 0), "a receiver clock behind the sender's")
	require.ErrorIs(t, VerifyWebhook(specSecret, h, []byte(specBody), signed.Add(6*time.Minute), 0), ErrWebhookTimestamp)
	require.ErrorIs(t, VerifyWebhook(specSecret, h, []byte(specBody), signed.Add(-6*time.Minute), -time.Second), ErrWebhookTimestamp)
	require.NoError(t, VerifyWebhook(specSecret, h, []byte(specBody), signed.Add(6*time.Minute), 10*time.Minute))
}

func TestVerifyWebhookAcceptsAnyOfSeveralSignatures(t *testing.T) {
	t.Parallel()
	body := []byte(specBody)
	retired, err := SignWebhook("retired-secret", specID, specTimestamp, body)
	require.NoError(t, err)
	now := time.Unix(specTimestamp, 0)
	for _, list := range []string{
		retired + " " + specSignature,
		specSignature + " " + retired,
		"v1a,c2lnbmVk " + retired + "  " + specSignature,
		"v1,not*base64 " + specSignature,
	} {
		require.NoError(t, VerifyWebhook(specSecret, specHeader(specID, specTimestamp, list), body, now, 0), list)
	}
	require.NoError(t, VerifyWebhook("retired-secret", specHeader(specID, specTimestamp, retired+" "+specSignature), body, now, 0))
	require.ErrorIs(t, VerifyWebhook("third-secret", specHeader(specID, specTimestamp, retired+" "+specSignature), body, now, 0), ErrWebhookSignature)
}
