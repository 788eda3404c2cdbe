package xtimer_test

import (
	"log"
	"os"

	"github.com/xtimer-go/xtimer"
)

func ExampleNewEmailNotifier() {
	mailer, err := xtimer.NewEmailNotifier(xtimer.EmailOptions{
		Addr:     "smtp.example.com:587", // STARTTLS, then AUTH PLAIN
		From:     "xtimer <xtimer@example.com>",
		To:       []string{"ledger-oncall@example.com"},
		Username: "xtimer@example.com",
		Password: os.Getenv("SMTP_PASSWORD"),
	})
	if err != nil {
		log.Fatal(err)
	}
	opts := xtimer.Options{App: "billing", Notifier: mailer}
	_ = opts // with DB set, to xtimer.New
}
