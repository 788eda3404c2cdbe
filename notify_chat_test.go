package xtimer

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chatReceiver is a real HTTP server standing for a chat service: it
// answers each request with the next of answers (then 200 and the last
// body), and keeps what it got.
type chatReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers []chatAnswer
	got     []chatRequest
}

type chatAnswer struct {
	status int
	body   string
}

type chatRequest struct {
	method, contentType, path string
	query                     url.Values
	rawQuery                  string
	body                      []byte
}

func newChatReceiver(t *testing.T, answers ...chatAnswer) *chatReceiver {
	r := &chatReceiver{answers: answers}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, chatRequest{method: req.Method, contentType: req.Header.Get("Content-Type"), path: req.URL.Path,
			query: req.URL.Query(), rawQuery: req.URL.RawQuery, body: body})
		a := r.answers[0]
		if len(r.answers) > 1 {
			r.answers = r.answers[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *chatReceiver) requests() []chatRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]chatRequest(nil), r.got...)
}

// ownedEvent is a failure of a task with an owner, with the characters
// chat formats and JSON escape in its error.
func ownedEvent() Event {
	e := sampleEvent()
	e.Owner = "team-ledger"
	e.Error = `ledger <locked> & "busy"`
	e.Message = "task close-day: execution 42 failed\nafter 3 attempts"
	return e
}

// ownedLine is alertLine(ownedEvent()), written out.
const ownedLine = `[billing] execution.failed task=close-day owner=team-ledger execution=42 error="ledger <locked> & \"busy\"" suppressed=4: task close-day: execution 42 failed after 3 attempts`

// requireJSON checks that body is the JSON of want.
func requireJSON(t *testing.T, want map[string]any, body []byte) {
	t.Helper()
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got), "body %s", body)
	require.Equal(t, want, got)
}

// signature is the HMAC-SHA256 of msg keyed by key, in base64, as the
// vendors' documentation computes it.
func signature(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	_, _ = io.WriteString(m, msg)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestAlertLineSaysTheAlertInOneLine(t *testing.T) {
	t.Parallel()
	require.Equal(t, ownedLine, alertLine(ownedEvent()))
	require.Equal(t, "[billing] replica.lost: replica node-7 lost", alertLine(Event{App: "billing", Kind: EventReplicaLost, Message: "replica node-7 lost"}))

	long := alertLine(Event{App: "billing", Kind: EventFailed, Message: strings.Repeat("é", 3000)})
	require.LessOrEqual(t, len(long), alertTextMax)
	require.True(t, strings.HasSuffix(long, "é..."), "cut on a character boundary, marked")
}

func TestSlackNotifierPostsTheDocumentedPayload(t *testing.T) {
	t.Parallel()
	rcv := newChatReceiver(t, chatAnswer{http.StatusOK, "ok"})
	n, err := NewSlackNotifier(SlackOptions{WebhookURL: rcv.srv.URL + "/services/T0/B0/token"})
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), ownedEvent()))

	got := rcv.requests()
	require.Len(t, got, 1)
	require.Equal(t, http.MethodPost, got[0].method)
	require.Equal(t, "application/json", got[0].contentType)
	require.Equal(t, "/services/T0/B0/token", got[0].path)
	// Slack's own escaping of &, < and >, then JSON's of the quotes.
	require.Equal(t, `{"text":"[billing] execution.failed task=close-day owner=team-ledger execution=42 `+
		`error=\"ledger &lt;locked&gt; &amp; \\\"busy\\\"\" suppressed=4: task close-day: execution 42 failed after 3 attempts"}`,
		string(got[0].body))
}

func TestSlackNotifierFailsOnSlacksErrorAndHidesTheURL(t *testing.T) {
	t.Parallel()
	rcv := newChatReceiver(t, chatAnswer{http.StatusNotFound, "channel_not_found"})
	n, err := NewSlackNotifier(SlackOptions{WebhookURL: rcv.srv.URL + "/services/T0/B0/token", Attempts: 3})
	require.NoError(t, err)
	err = n.Notify(context.Background(), ownedEvent())
	require.ErrorContains(t, err, `xtimer: slack: alert a1b2 to `+rcv.srv.URL+`/***: status 404: "channel_not_found"`)
	require.NotContains(t, err.Error(), "token")
	require.Len(t, rcv.requests(), 1, "a 404 is final")

	rcv = newChatReceiver(t, chatAnswer{http.StatusInternalServerError, "rollup_error"}, chatAnswer{http.StatusOK, "ok"})
	n, err = NewSlackNotifier(SlackOptions{WebhookURL: rcv.srv.URL + "/services/T0/B0/token"})
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), ownedEvent()))
	require.Len(t, rcv.requests(), 2, "a 500 is tried again")
}

func TestDingTalkNotifierSignsTheURLAndPostsText(t *testing.T) {
	t.Parallel()
	const secret = "SEC0123456789abcdef"
	rcv := newChatReceiver(t, chatAnswer{http.StatusOK, `{"errcode":0,"errmsg":"ok"}`})
	n, err := NewDingTalkNotifier(DingTalkOptions{WebhookURL: rcv.srv.URL + "/robot/send?access_token=tok123", Secret: secret})
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), ownedEvent()))

	got := rcv.requests()
	require.Len(t, got, 1)
	r := got[0]
	require.Equal(t, http.MethodPost, r.method)
	require.Equal(t, "application/json", r.contentType)
	require.Equal(t, "/robot/send", r.path)
	require.Equal(t, "tok123", r.query.Get("access_token"), "the robot's token stays")
	ts := r.query.Get("timestamp")
	ms, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err)
	require.Greater(t, ms, int64(1e12), "milliseconds")
	want := signature(secret, ts+"\n"+secret)
	require.Equal(t, want, r.query.Get("sign"))
	require.Contains(t, r.rawQuery, "&sign="+url.QueryEscape(want), "the base64 is URL-encoded")
	requireJSON(t, map[string]any{"msgtype": "text", "text": map[string]any{"content": ownedLine}}, r.body)
}

func TestDingTalkNotifierFailsOnANonZeroErrcode(t *testing.T) {
	t.Parallel()
	rcv := newChatReceiver(t, chatAnswer{http.StatusOK, `{"errcode":310000,"errmsg":"sign not match"}`})
	n, err := NewDingTalkNotifier(DingTalkOptions{WebhookURL: rcv.srv.URL + "/robot/send?access_token=tok123", Secret: "SECsecret"})
	require.NoError(t, err)
	err = n.Notify(context.Background(), ownedEvent())
	require.ErrorContains(t, err, `errcode 310000: "sign not match"`)
	require.NotContains(t, err.Error(), "tok123")
	require.NotContains(t, err.Error(), "SECsecret")
	require.Len(t, rcv.requests(), 1, "the alerter tries again, minutes later")

	rcv = newChatReceiver(t, chatAnswer{http.StatusOK, `<html>proxy</html>`})
	n, err = NewDingTalkNotifier(DingTalkOptions{WebhookURL: rcv.srv.URL + "/robot/send?access_token=tok123"})
	require.NoError(t, err)
	require.ErrorContains(t, n.Notify(context.Background(), ownedEvent()), "answer is not the documented JSON")
	require.Empty(t, rcv.requests()[0].query.Get("sign"), "unsigned without a secret")
}

func TestFeishuNotifierSignsTheBodyAndPostsText(t *testing.T) {
	t.Parallel()
	const secret = "feishu-secret"
	rcv := newChatReceiver(t, chatAnswer{http.StatusOK, `{"code":0,"msg":"success","data":{}}`})
	n, err := NewFeishuNotifier(FeishuOptions{WebhookURL: rcv.srv.URL + "/open-apis/bot/v2/hook/hook-id", Secret: secret})
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), ownedEvent()))

	got := rcv.requests()
	require.Len(t, got, 1)
	r := got[0]
	require.Equal(t, http.MethodPost, r.method)
	require.Equal(t, "application/json", r.contentType)
	require.Equal(t, "/open-apis/bot/v2/hook/hook-id", r.path)
	var signed struct {
		Timestamp string `json:"timestamp"`
		Sign      string `json:"sign"`
	}
	require.NoError(t, json.Unmarshal(r.body, &signed))
	sec, err := strconv.ParseInt(signed.Timestamp, 10, 64)
	require.NoError(t, err)
	require.Less(t, sec, int64(1e11), "seconds")
	// The key is the timestamp, a newline and the secret; the message is empty.
	require.Equal(t, signature(signed.Timestamp+"\n"+secret, ""), signed.Sign)
	requireJSON(t, map[string]any{"msg_type": "text", "content": map[string]any{"text": ownedLine},
		"timestamp": signed.Timestamp, "sign": signed.Sign}, r.body)
}

func TestFeishuNotifierFailsOnANonZeroCode(t *testing.T) {
	t.Parallel()
	rcv := newChatReceiver(t, chatAnswer{http.StatusOK, `{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}`})
	n, err := NewFeishuNotifier(FeishuOptions{WebhookURL: rcv.srv.URL + "/open-apis/bot/v2/hook/hook-id", Secret: "feishu-secret"})
	require.NoError(t, err)
	err = n.Notify(context.Background(), ownedEvent())
	require.ErrorContains(t, err, "code 19021")
	require.NotContains(t, err.Error(), "hook-id")
	require.Len(t, rcv.requests(), 1)

	rcv = newChatReceiver(t, chatAnswer{http.StatusOK, `{"code":0,"msg":"success"}`})
	n, err = NewFeishuNotifier(FeishuOptions{WebhookURL: rcv.srv.URL + "/open-apis/bot/v2/hook/hook-id"})
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), ownedEvent()))
	requireJSON(t, map[string]any{"msg_type": "text", "content": map[string]any{"text": ownedLine}}, rcv.requests()[0].body)
}

func TestWeComNotifierPostsTextAndFailsOnANonZeroErrcode(t *testing.T) {
	t.Parallel()
	rcv := newChatReceiver(t, chatAnswer{http.StatusOK, `{"errcode":0,"errmsg":"ok"}`},
		chatAnswer{http.StatusOK, `{"errcode":93000,"errmsg":"invalid webhook url"}`})
	n, err := NewWeComNotifier(WeComOptions{WebhookURL: rcv.srv.URL + "/cgi-bin/webhook/send?key=wecom-key"})
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), ownedEvent()))
	err = n.Notify(context.Background(), ownedEvent())
	require.ErrorContains(t, err, `errcode 93000: "invalid webhook url"`)
	require.NotContains(t, err.Error(), "wecom-key")

	got := rcv.requests()
	require.Len(t, got, 2)
	require.Equal(t, http.MethodPost, got[0].method)
	require.Equal(t, "application/json", got[0].contentType)
	require.Equal(t, "wecom-key", got[0].query.Get("key"))
	requireJSON(t, map[string]any{"msgtype": "text", "text": map[string]any{"content": ownedLine}}, got[0].body)
}

func TestChatNotifierErrorsHideTheURLsToken(t *testing.T) {
	t.Parallel()
	// Nothing listens there: the client's error would show the URL.
	rcv := newChatReceiver(t, chatAnswer{http.StatusOK, "ok"})
	rcv.srv.Close()
	n, err := NewWeComNotifier(WeComOptions{WebhookURL: rcv.srv.URL + "/cgi-bin/webhook/send?key=wecom-key", Attempts: 1})
	require.NoError(t, err)
	err = n.Notify(context.Background(), ownedEvent())
	require.Error(t, err)
	require.NotContains(t, err.Error(), "wecom-key")
	require.Contains(t, err.Error(), rcv.srv.URL+"/***")
}

func TestChatNotifierOptionsAreValidated(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		new    func() error
		want   string
		hidden string // a secret the error must not show
	}{
		{func() error { _, err := NewSlackNotifier(SlackOptions{}); return err }, `SlackOptions.WebhookURL = "": want an absolute http or https URL`, ""},
		{func() error {
			_, err := NewSlackNotifier(SlackOptions{WebhookURL: "hooks.slack.com/services/T0/B0/token"})
			return err
		}, `SlackOptions.WebhookURL = "***" (36 bytes, hidden): want an absolute http or https URL`, "token"},
		{func() error {
			_, err := NewDingTalkNotifier(DingTalkOptions{WebhookURL: "ftp://oapi.dingtalk.com/robot/send?access_token=tok"})
			return err
		}, `DingTalkOptions.WebhookURL = ftp://oapi.dingtalk.com/***: want an absolute http or https URL`, "access_token"},
		{func() error {
			_, err := NewDingTalkNotifier(DingTalkOptions{WebhookURL: "https://oapi.dingtalk.com/robot/send", Timeout: -time.Second})
			return err
		}, "DingTalkOptions.Timeout = -1s: want 0 (default) or more", ""},
		{func() error {
			_, err := NewFeishuNotifier(FeishuOptions{WebhookURL: "https://bob:pw@open.feishu.cn/open-apis/bot/v2/hook/x"})
			return err
		}, "FeishuOptions.WebhookURL = https://open.feishu.cn/***: credentials in the URL are refused", "pw"},
		{func() error {
			_, err := NewFeishuNotifier(FeishuOptions{WebhookURL: "https://open.feishu.cn/hook/x#frag"})
			return err
		}, "FeishuOptions.WebhookURL = https://open.feishu.cn/***: want no #fragment", "hook/x"},
		{func() error {
			_, err := NewWeComNotifier(WeComOptions{WebhookURL: "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k", Attempts: 11})
			return err
		}, "WeComOptions.Attempts = 11: want 0 (default) to 10", ""},
	} {
		err := c.new()
		require.ErrorContains(t, err, c.want)
		if c.hidden != "" {
			require.NotContains(t, err.Error(), c.hidden)
		}
	}
}

func TestChatNotifiersNotMadeByTheirConstructorFailWithoutPanicking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var nilSlack *SlackNotifier
	for _, n := range []Notifier{nilSlack, &SlackNotifier{}, (*DingTalkNotifier)(nil), &FeishuNotifier{}, &WeComNotifier{}} {
		require.ErrorIs(t, n.Notify(ctx, ownedEvent()), errNoNotifier)
	}
}
