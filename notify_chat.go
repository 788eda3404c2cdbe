package xtimer

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file holds the chat notifiers: Slack, DingTalk, Feishu (Lark) and
// WeCom incoming webhooks. Each posts the payload its vendor documents,
// signed where the vendor signs, with the text alertLine makes, through
// the webhook's HTTP plumbing (poster, notify.go). Their URLs carry the
// room's token: errors show only the scheme and host.

// SlackOptions configures a SlackNotifier.
type SlackOptions struct {
	// WebhookURL is the channel's incoming webhook
	// (https://hooks.slack.com/services/...). Required.
	WebhookURL string
	// Timeout bounds each request. Defaults to DefaultWebhookTimeout (10s).
	Timeout time.Duration
	// Attempts is how many requests one Notify makes at most, as
	// WebhookOptions.Attempts. Defaults to DefaultWebhookAttempts (3).
	Attempts int
	// Client sends the requests. Defaults to a client without redirects.
	Client *http.Client
}

// SlackNotifier posts alerts to a Slack channel through an incoming
// webhook, as {"text": "..."}.
type SlackNotifier struct{ c chat }

// NewSlackNotifier checks o and returns the notifier, or an error naming
// the bad field.
//
// Slack documents the payload at https://api.slack.com/messaging/webhooks
// and its failures, a status other than 200 with a word such as
// "invalid_payload" or "channel_not_found" as the body, at
// https://api.slack.com/changelog/2016-05-17-changes-to-errors-for-incoming-webhooks.
// Incoming webhooks are not signed: the URL is the secret.
func NewSlackNotifier(o SlackOptions) (*SlackNotifier, error) {
	p, err := newChatPoster("SlackOptions", "slack", o.WebhookURL, o.Timeout, o.Attempts, o.Client)
	if err != nil {
		return nil, err
	}
	return &SlackNotifier{chat{p: p, try: func(text string) (postTry, error) {
		body, err := chatJSON(map[string]string{"text": slackEscape(text)})
		return postTry{url: o.WebhookURL, body: body}, err
	}}}, nil
}

// Notify posts e to the channel.
func (n *SlackNotifier) Notify(ctx context.Context, e Event) error {
	if n == nil {
		return errNoNotifier
	}
	return n.c.notify(ctx, e)
}

// slackEscape escapes the three characters Slack's text formatting gives
// a meaning (https://api.slack.com/reference/surfaces/formatting#escaping),
// so that an error such as "<nil>" reads as it was.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// DingTalkOptions configures a DingTalkNotifier.
type DingTalkOptions struct {
	// WebhookURL is the custom robot's webhook
	// (https://oapi.dingtalk.com/robot/send?access_token=...). Required.
	WebhookURL string
	// Secret is the robot's signing secret (its security setting "加签",
	// the string starting SEC). Empty sends unsigned, for a robot secured
	// by keywords or IP addresses.
	Secret string
	// Timeout bounds each request. Defaults to DefaultWebhookTimeout (10s).
	Timeout time.Duration
	// Attempts is how many requests one Notify makes at most, as
	// WebhookOptions.Attempts. Defaults to DefaultWebhookAttempts (3).
	Attempts int
	// Client sends the requests. Defaults to a client without redirects.
	Client *http.Client
}

// DingTalkNotifier posts alerts to a DingTalk group through a custom
// robot, as a text message.
type DingTalkNotifier struct{ c chat }

// NewDingTalkNotifier checks o and returns the notifier, or an error
// naming the bad field.
//
// DingTalk documents the message, {"msgtype":"text","text":{"content":
// "..."}}, answered with {"errcode":0,"errmsg":"ok"} on success, at
// https://open.dingtalk.com/document/robots/custom-robot-access, and the
// signature at
// https://open.dingtalk.com/document/robots/customize-robot-security-settings:
// the HMAC-SHA256, keyed by the secret, of the time in milliseconds, a
// newline and the secret, in base64, sent URL-encoded as the query
// parameters timestamp and sign.
func NewDingTalkNotifier(o DingTalkOptions) (*DingTalkNotifier, error) {
	p, err := newChatPoster("DingTalkOptions", "dingtalk", o.WebhookURL, o.Timeout, o.Attempts, o.Client)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(o.WebhookURL) // parsed by newChatPoster
	return &DingTalkNotifier{chat{p: p, accepted: errcodeAccepted, try: func(text string) (postTry, error) {
		body, err := chatJSON(map[string]any{"msgtype": "text", "text": map[string]string{"content": text}})
		to := *u
		if o.Secret != "" {
			ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
			signed := "timestamp=" + ts + "&sign=" + url.QueryEscape(hmacBase64([]byte(o.Secret), ts+"\n"+o.Secret))
			if to.RawQuery != "" {
				signed = to.RawQuery + "&" + signed
			}
			to.RawQuery = signed
		}
		return postTry{url: to.String(), body: body}, err
	}}}, nil
}

// Notify posts e to the group.
func (n *DingTalkNotifier) Notify(ctx context.Context, e Event) error {
	if n == nil {
		return errNoNotifier
	}
	return n.c.notify(ctx, e)
}

// FeishuOptions configures a FeishuNotifier.
type FeishuOptions struct {
	// WebhookURL is the custom bot's webhook
	// (https://open.feishu.cn/open-apis/bot/v2/hook/..., or Lark's
	// https://open.larksuite.com/open-apis/bot/v2/hook/...). Required.
	WebhookURL string
	// Secret is the bot's signing secret (its security setting "signature
	// verification"). Empty sends unsigned.
	Secret string
	// Timeout bounds each request. Defaults to DefaultWebhookTimeout (10s).
	Timeout time.Duration
	// Attempts is how many requests one Notify makes at most, as
	// WebhookOptions.Attempts. Defaults to DefaultWebhookAttempts (3).
	Attempts int
	// Client sends the requests. Defaults to a client without redirects.
	Client *http.Client
}

// FeishuNotifier posts alerts to a Feishu or Lark group through a custom
// bot, as a text message.
type FeishuNotifier struct{ c chat }

// NewFeishuNotifier checks o and returns the notifier, or an error naming
// the bad field.
//
// Feishu documents the message, {"msg_type":"text","content":{"text":
// "..."}}, answered with {"code":0,"msg":"success"} on success, and the
// signature at https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot
// (Lark: https://open.larksuite.com/document/client-docs/bot-v3/add-custom-bot):
// the HMAC-SHA256 of an empty message keyed by the time in seconds, a
// newline and the secret, in base64, sent as the body's fields
// "timestamp" (a string) and "sign".
func NewFeishuNotifier(o FeishuOptions) (*FeishuNotifier, error) {
	p, err := newChatPoster("FeishuOptions", "feishu", o.WebhookURL, o.Timeout, o.Attempts, o.Client)
	if err != nil {
		return nil, err
	}
	return &FeishuNotifier{chat{p: p, accepted: feishuAccepted, try: func(text string) (postTry, error) {
		msg := map[string]any{"msg_type": "text", "content": map[string]string{"text": text}}
		if o.Secret != "" {
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			msg["timestamp"], msg["sign"] = ts, hmacBase64([]byte(ts+"\n"+o.Secret), "")
		}
		body, err := chatJSON(msg)
		return postTry{url: o.WebhookURL, body: body}, err
	}}}, nil
}

// Notify posts e to the group.
func (n *FeishuNotifier) Notify(ctx context.Context, e Event) error {
	if n == nil {
		return errNoNotifier
	}
	return n.c.notify(ctx, e)
}

// WeComOptions configures a WeComNotifier.
type WeComOptions struct {
	// WebhookURL is the group robot's webhook
	// (https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...). Required.
	WebhookURL string
	// Timeout bounds each request. Defaults to DefaultWebhookTimeout (10s).
	Timeout time.Duration
	// Attempts is how many requests one Notify makes at most, as
	// WebhookOptions.Attempts. Defaults to DefaultWebhookAttempts (3).
	Attempts int
	// Client sends the requests. Defaults to a client without redirects.
	Client *http.Client
}

// WeComNotifier posts alerts to a WeCom (企业微信) group through a group
// robot, as a text message.
type WeComNotifier struct{ c chat }

// NewWeComNotifier checks o and returns the notifier, or an error naming
// the bad field.
//
// WeCom documents the message, {"msgtype":"text","text":{"content":
// "..."}} with at most 2048 bytes of content, answered with
// {"errcode":0,"errmsg":"ok"} on success, at
// https://developer.work.weixin.qq.com/document/path/91770. Group robots
// are not signed: the key in the URL is the secret.
func NewWeComNotifier(o WeComOptions) (*WeComNotifier, error) {
	p, err := newChatPoster("WeComOptions", "wecom", o.WebhookURL, o.Timeout, o.Attempts, o.Client)
	if err != nil {
		return nil, err
	}
	return &WeComNotifier{chat{p: p, accepted: errcodeAccepted, try: func(text string) (postTry, error) {
		body, err := chatJSON(map[string]any{"msgtype": "text", "text": map[string]string{"content": text}})
		return postTry{url: o.WebhookURL, body: body}, err
	}}}, nil
}

// Notify posts e to the group.
func (n *WeComNotifier) Notify(ctx context.Context, e Event) error {
	if n == nil {
		return errNoNotifier
	}
	return n.c.notify(ctx, e)
}

// errNoNotifier is what Notify returns on a nil notifier (a constructor's
// error ignored) or one not made by its constructor, rather than
// panicking in the alerter.
var errNoNotifier = errors.New("xtimer: Notify on a nil notifier, or one not made by its constructor")

// chat is what the chat notifiers share: the poster, and how one vendor
// takes the text and says it delivered it.
type chat struct {
	p *poster
	// try makes one try's request of the text.
	try func(text string) (postTry, error)
	// accepted reads a 2xx response; nil takes any.
	accepted func(body []byte) error
}

func (c *chat) notify(ctx context.Context, e Event) error {
	if c.p == nil {
		return errNoNotifier
	}
	text := alertLine(e)
	return c.p.post(ctx, e.ID, func() (postTry, error) { return c.try(text) }, c.accepted)
}

// newChatPoster checks a chat notifier's options (opts names their type)
// and returns its poster.
func newChatPoster(opts, name, webhookURL string, timeout time.Duration, attempts int, client *http.Client) (*poster, error) {
	bad := func(field string, value any, reason string) error {
		return fmt.Errorf("xtimer: %s.%s = %v: %s", opts, field, value, reason)
	}
	u, err := url.Parse(webhookURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, bad("WebhookURL", maskURL(webhookURL), "want an absolute http or https URL")
	case u.User != nil:
		return nil, bad("WebhookURL", maskURL(webhookURL), "credentials in the URL are refused")
	case u.Fragment != "":
		return nil, bad("WebhookURL", maskURL(webhookURL), "want no #fragment")
	}
	return newPoster(bad, name, maskURL(webhookURL), timeout, attempts, client)
}

// maskURL shows a chat webhook's URL without its token, which its path or
// query holds: the scheme and host only.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return `""`
	case err != nil || u.Host == "":
		return fmt.Sprintf("%q (%d bytes, hidden)", "***", len(raw))
	case u.Path == "" && u.RawQuery == "" && u.Fragment == "":
		return u.Scheme + "://" + u.Host
	default:
		return u.Scheme + "://" + u.Host + "/***"
	}
}

// chatJSON encodes a chat payload, leaving <, > and & as they are.
func chatJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// hmacBase64 is the base64 of the HMAC-SHA256 of msg keyed by key.
func hmacBase64(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// errcodeAccepted reads a DingTalk or WeCom answer: errcode 0 is
// delivery; they answer failures with HTTP 200 and another errcode.
func errcodeAccepted(body []byte) error {
	var r struct {
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("answer is not the documented JSON%s", bodySnippet(body))
	}
	if r.ErrCode != 0 {
		return fmt.Errorf("errcode %d: %q", r.ErrCode, r.ErrMsg)
	}
	return nil
}

// feishuAccepted reads a Feishu answer: code 0 is delivery (StatusCode,
// an older field, as well); failures come with HTTP 200 and another code.
func feishuAccepted(body []byte) error {
	var r struct {
		Code          int    `json:"code"`
		Msg           string `json:"msg"`
		StatusCode    int    `json:"StatusCode"`
		StatusMessage string `json:"StatusMessage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("answer is not the documented JSON%s", bodySnippet(body))
	}
	if r.Code != 0 {
		return fmt.Errorf("code %d: %q", r.Code, r.Msg)
	}
	if r.StatusCode != 0 {
		return fmt.Errorf("StatusCode %d: %q", r.StatusCode, r.StatusMessage)
	}
	return nil
}

// alertTextMax bounds the text of a chat message, under the smallest
// vendor limit (WeCom's 2048 bytes).
const alertTextMax = 2000

// alertLine says an alert in one line for people, the same in every chat
// notifier and an email's first line: app, kind, task, owner, execution
// and error, then the event's Message. For example:
//
//	[billing] execution.failed task=close-day owner=team-ledger execution=42 error="ledger locked": task close-day: execution 42 failed
func alertLine(e Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s", oneLine(e.App), e.Kind)
	if e.Task != "" {
		fmt.Fprintf(&b, " task=%s", oneLine(e.Task))
	}
	if e.Owner != "" {
		fmt.Fprintf(&b, " owner=%s", oneLine(e.Owner))
	}
	if e.ExecutionID != 0 {
		fmt.Fprintf(&b, " execution=%d", e.ExecutionID)
	}
	if e.Error != "" {
		fmt.Fprintf(&b, " error=%q", e.Error)
	}
	if e.Suppressed > 0 {
		fmt.Fprintf(&b, " suppressed=%d", e.Suppressed)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(oneLine(e.Message))
	}
	line := strings.ToValidUTF8(b.String(), "\uFFFD")
	if len(line) <= alertTextMax {
		return line
	}
	cut := alertTextMax - len("...")
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + "..."
}

// oneLine folds every run of white space in s, newlines included, into
// one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
