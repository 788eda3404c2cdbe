package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/xtimer-go/xtimer/internal/secretbox"
	"github.com/xtimer-go/xtimer/internal/store"
)

// This file keeps the secrets of HTTP tasks (secret header values and the
// signing secret, inside xtimer_tasks.http_target) encrypted at rest with
// Config.SecretKeys. The root encrypts what an edit writes (SealSecret);
// Start encrypts what is stored in plaintext or under an older key
// (sealStored); the callback decrypts just before the request
// (openSecrets, httprun.go). A replica that cannot decrypt refuses the
// attempt: a secret is sent decrypted or not at all, never as ciphertext.

// ReasonSecretUndecryptable is the reason of an execution failed without
// a request because its task's secrets do not decrypt on the replica.
const ReasonSecretUndecryptable = "secret undecryptable"

// SigningSecretField and HeaderSecretField name a secret of a target: in
// messages, and in the additional data that binds its ciphertext to it.
const SigningSecretField = "target.secret"

// HeaderSecretField names the value of the secret header name; header
// names are case-insensitive, and a kept value is matched by name.
func HeaderSecretField(name string) string {
	return "target.headers[" + strings.ToLower(name) + "]"
}

// secrets seals and opens the secrets of the app's HTTP tasks.
type secrets struct {
	keys    *secretbox.Keyring // nil: no key, plaintext
	app     string
	replica string
	log     *slog.Logger
	warned  atomic.Bool // the plaintext warning, once per Engine
}

// aad binds a secret to its app, task and field: a ciphertext copied to
// another task, or to another field, does not decrypt.
func (c *secrets) aad(code, field string) []byte {
	return secretbox.AAD("xtimer http_target v1", c.app, code, field)
}

// warnPlaintext logs, once, that secrets are stored in plaintext.
func (c *secrets) warnPlaintext() {
	if c.warned.CompareAndSwap(false, true) {
		c.log.Warn("HTTP task secrets are stored in plaintext: set Options.SecretKeys (xtimer-server -secret-key-file or XTIMER_SECRET_KEY) to encrypt them at rest")
	}
}

// SealSecret returns what to store for the secret field of task code: its
// ciphertext under the first key, or plain itself without keys (logged
// once).
func (s *Engine) SealSecret(code, field, plain string) (string, error) {
	c := &s.secrets
	if c.keys == nil {
		c.warnPlaintext()
		return plain, nil
	}
	sealed, err := c.keys.Seal(plain, c.aad(code, field))
	if err != nil {
		return "", fmt.Errorf("xtimer: http task %q: encrypt %s: %w", code, field, err)
	}
	return sealed, nil
}

// secretError is why the secrets of a task do not decrypt here.
type secretError struct {
	task, field, keyID, replica string
	err                         error // a secretbox error
}

func (e *secretError) Error() string {
	what := fmt.Sprintf("xtimer: http task %q: %s", e.task, describeField(e.field))
	switch {
	case errors.Is(e.err, secretbox.ErrNoKeys):
		return fmt.Sprintf("%s is encrypted under key %q and replica %s has no secret keys (Options.SecretKeys)", what, e.keyID, e.replica)
	case errors.Is(e.err, secretbox.ErrUnknownKey):
		var oe *secretbox.OpenError
		errors.As(e.err, &oe)
		return fmt.Sprintf("%s is encrypted under key %q, which replica %s does not have: %v", what, e.keyID, e.replica, oe.Err)
	case errors.Is(e.err, secretbox.ErrNotAuthentic):
		return fmt.Sprintf("%s does not decrypt under key %q on replica %s: this replica's key of that id differs from the one that encrypted it, "+
			"or the stored value was altered or copied from another task", what, e.keyID, e.replica)
	}
	return fmt.Sprintf("%s starts with %q but is not a well-formed encrypted value", what, secretbox.Prefix)
}

func (e *secretError) Unwrap() error { return e.err }

// describeField names a secret field for people.
func describeField(field string) string {
	if name, ok := strings.CutPrefix(field, "target.headers["); ok {
		return fmt.Sprintf("secret header %q", strings.TrimSuffix(name, "]"))
	}
	return "signing secret (" + field + ")"
}

// open returns the plaintext of a stored secret value: the value itself
// when it is not sealed (stored before keys were set, or by a replica
// without keys).
func (c *secrets) open(code, field, stored string) (string, error) {
	if !secretbox.IsSealed(stored) {
		if c.keys == nil && stored != "" {
			c.warnPlaintext()
		}
		return stored, nil
	}
	plain, err := c.keys.Open(stored, c.aad(code, field))
	if err != nil {
		keyID, _ := secretbox.KeyID(stored)
		return "", &secretError{task: code, field: field, keyID: keyID, replica: c.replica, err: err}
	}
	return plain, nil
}

// openSecrets returns sp with its secrets decrypted, for one request; an
// error is a *secretError.
func (c *secrets) openSecrets(code string, sp *HTTPSpec) (*HTTPSpec, error) {
	out := *sp
	out.Headers = make([]HTTPHeader, len(sp.Headers))
	for i, h := range sp.Headers {
		if h.Secret {
			v, err := c.open(code, HeaderSecretField(h.Name), h.Value)
			if err != nil {
				return nil, err
			}
			h.Value = v
		}
		out.Headers[i] = h
	}
	var err error
	if out.Secret, err = c.open(code, SigningSecretField, sp.Secret); err != nil {
		return nil, err
	}
	return &out, nil
}

// reseal returns target with every secret sealed under the first key:
// those in plaintext and those under another key. changed is false when
// there is nothing to do. A value that does not open is left as it is,
// and its error returned with the rest done.
func (c *secrets) reseal(code, target string) (out string, changed bool, openErr error) {
	var sp HTTPSpec
	if err := json.Unmarshal([]byte(target), &sp); err != nil {
		return "", false, fmt.Errorf("xtimer: http task %q: stored target: %w", code, err)
	}
	var errs []error
	redo := func(field string, v *string) {
		if *v == "" {
			return
		}
		plain := *v
		if secretbox.IsSealed(*v) {
			if id, _ := secretbox.KeyID(*v); id == c.keys.First() {
				return
			}
			var err error
			if plain, err = c.open(code, field, *v); err != nil {
				errs = append(errs, err)
				return
			}
		}
		sealed, err := c.keys.Seal(plain, c.aad(code, field))
		if err != nil {
			errs = append(errs, err)
			return
		}
		*v, changed = sealed, true
	}
	for i := range sp.Headers {
		if sp.Headers[i].Secret {
			redo(HeaderSecretField(sp.Headers[i].Name), &sp.Headers[i].Value)
		}
	}
	redo(SigningSecretField, &sp.Secret)
	if !changed {
		return target, false, errors.Join(errs...)
	}
	b, err := json.Marshal(sp) //nolint:gosec // G117: the stored form, its secrets sealed just above
	if err != nil {
		return "", false, fmt.Errorf("xtimer: http task %q: encode target: %w", code, err)
	}
	return string(b), true, errors.Join(errs...)
}

// sealPage is how many targets sealStored reads at a time.
const sealPage = 500

// sealTries bounds the conditional writes of one target: a write misses
// when the row changed since it was read, and is tried again only while
// its target is still the one read (a pause changed the version).
const sealTries = 3

// sealStored encrypts under the first key the secrets stored in plaintext
// or under another key, one conditional write per task
// (store.RewriteSecretTarget): an edit made meanwhile wins. Secrets that
// do not decrypt (a key no longer configured) are logged and left as they
// are. Without keys it does nothing.
func (s *Engine) sealStored(ctx context.Context) error {
	c := &s.secrets
	if c.keys == nil {
		return nil
	}
	var sealed, kept, undecryptable int
	for after := int64(0); ; {
		page, err := s.store.SecretTargets(ctx, s.opts.App, after, sealPage)
		if err != nil {
			return err
		}
		for _, t := range page {
			after = t.ID
			wrote, changed, openErr, err := s.sealTarget(ctx, t)
			if err != nil {
				return err
			}
			if openErr != nil {
				undecryptable++
				s.log.Error("stored http task secret left as it is", "task", t.Code, "err", openErr)
			}
			switch {
			case wrote:
				sealed++
			case changed:
				kept++
			}
		}
		if len(page) < sealPage {
			break
		}
	}
	if sealed+kept+undecryptable > 0 {
		s.log.Info("http task secrets encrypted under the first secret key", "key", c.keys.First(), "tasks", sealed,
			"changed_meanwhile", kept, "undecryptable", undecryptable)
	}
	return nil
}

// sealTarget reseals one stored target: wrote says it was written,
// changed that it needed to be and an edit came first; openErr is about a
// secret that does not decrypt (the others are sealed), err about the
// database.
func (s *Engine) sealTarget(ctx context.Context, t store.SecretTarget) (wrote, changed bool, openErr, err error) {
	for try := 0; ; try++ {
		next, todo, openErr := s.secrets.reseal(t.Code, t.Target)
		if !todo {
			return false, false, openErr, nil
		}
		ok, err := s.store.RewriteSecretTarget(ctx, s.opts.App, t.Code, t.Version, t.Target, next)
		switch {
		case err != nil:
			return false, true, openErr, err
		case ok:
			return true, true, openErr, nil
		case try+1 >= sealTries:
			return false, true, openErr, nil
		}
		row, err := s.store.Task(ctx, s.opts.App, t.Code)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return false, true, nil, nil // deleted meanwhile
		case err != nil:
			return false, true, openErr, err
		case row.HTTPTarget == nil || *row.HTTPTarget != t.Target:
			return false, true, openErr, nil // edited meanwhile: the edit wins
		}
		t.Version = row.Version // only its version moved (a pause): again
	}
}
