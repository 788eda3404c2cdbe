package xtimer_test

import (
	"log"
	"os"

	"github.com/xtimer-go/xtimer"
)

func ExampleNewSlackNotifier() {
	// The channel's incoming webhook; its URL is its secret: keep it out of
	// the code.
	slack, err := xtimer.NewSlackNotifier(xtimer.SlackOptions{WebhookURL: os.Getenv("SLACK_WEBHOOK_URL")})
	if err != nil {
		log.Fatal(err) // names the bad field, never the URL's token
	}
	// A DingTalk robot with its signing secret, for the team that reads DingTalk.
	dingtalk, err := xtimer.NewDingTalkNotifier(xtimer.DingTalkOptions{
		WebhookURL: os.Getenv("DINGTALK_WEBHOOK_URL"),
		Secret:     os.Getenv("DINGTALK_SECRET"),
	})
	if err != nil {
		log.Fatal(err)
	}
	// The ledger team's alerts go to DingTalk, every other alert to Slack.
	opts := xtimer.Options{App: "billing",
		Notifier: xtimer.RouteByOwner(map[string]xtimer.Notifier{"team-ledger": dingtalk}, slack)}
	_ = opts // with DB set, to xtimer.New; tasks name their owner WithOwner("team-ledger")
}
