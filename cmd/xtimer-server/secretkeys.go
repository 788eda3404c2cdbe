package main

import (
	"os"

	"github.com/xtimer-go/xtimer"
)

// secretKeyEnv holds the keys themselves, in the format of
// -secret-key-file; set one or the other.
const secretKeyEnv = "XTIMER_SECRET_KEY" //nolint:gosec // G101: the variable's name, not a key

// readSecretKeys fills c.SecretKeys from -secret-key-file or from
// XTIMER_SECRET_KEY (envKeys): xtimer.ParseSecretKeys's format, one key a
// line, the first encrypting. A file that cannot be read, or a bad line,
// is a usage error naming the file (or the variable) and the line; an
// error never shows key bytes.
func (c *config) readSecretKeys(envKeys string) error {
	var text, from string
	switch {
	case c.SecretKeyFile != "" && envKeys != "":
		return usagef("-secret-key-file %q and %s are both set: give the keys one way", c.SecretKeyFile, secretKeyEnv)
	case c.SecretKeyFile != "":
		b, err := os.ReadFile(c.SecretKeyFile)
		if err != nil {
			return usagef("-secret-key-file %q: %w", c.SecretKeyFile, err)
		}
		text, from = string(b), "-secret-key-file "+`"`+c.SecretKeyFile+`"`
	case envKeys != "":
		text, from = envKeys, secretKeyEnv
	default:
		return nil
	}
	keys, err := xtimer.ParseSecretKeys(text) // a *xtimer.SecretKeyError naming the line
	if err != nil {
		return usagef("%s: %w", from, err)
	}
	c.SecretKeys = keys
	return nil
}
