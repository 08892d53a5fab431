package backend

import (
	"errors"
	"net/url"
	"sort"
	"strings"
)

// Redacted replaces a credential in URLs and messages.
const Redacted = "xxxxx"

// credentialFragments are the parts of a query parameter's name that mark
// its value as a credential (compared case-insensitively): password,
// sslpassword, pwd, sslkey, keyfile, token, secret, client_secret,
// credentials, signature, tlsCertificateKeyFilePassword, and the like. A
// key file's path is redacted too: it tells where the key lives.
var credentialFragments = []string{"pass", "pwd", "secret", "token", "key", "credential", "signature", "authmechanismproperties"}

// IsCredentialParam reports whether a URL query parameter's value is a
// credential that errors and logs must not show: its name contains, in any
// case, one of pass, pwd, secret, token, key, credential or signature (or it
// is MongoDB's authMechanismProperties, which can carry a session token).
func IsCredentialParam(name string) bool {
	n := strings.ToLower(name)
	for _, f := range credentialFragments {
		if strings.Contains(n, f) {
			return true
		}
	}
	return false
}

// RedactURL returns rawURL with the password of its user part and the
// value of every credential parameter (see IsCredentialParam) replaced by
// Redacted, for logs and errors. The rest of the URL, the order of its
// parameters included, is kept. A URL that does not parse is replaced
// whole, since where its password sits is unknown.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	changed := false
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Redacted)
		changed = true
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			k, _, hasValue := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if hasValue && IsCredentialParam(name) {
				parts[i] = k + "=" + Redacted
				changed = true
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if !changed {
		return rawURL
	}
	return u.String()
}

// URLSecrets returns the credentials u carries: the password of its user
// part and the values of its credential parameters, each as written in the
// URL, decoded and as URL encoding spells it, longest first. Empty values
// are left out.
func URLSecrets(u *url.URL) []string {
	if u == nil {
		return nil
	}
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && s != Redacted {
			seen[s] = true
		}
	}
	if pw, has := u.User.Password(); has {
		add(pw)
		add(url.PathEscape(pw))
		add(url.QueryEscape(pw))
		// The user part as written, when it was percent-encoded.
		if raw := u.User.String(); strings.Contains(raw, ":") {
			_, rawPW, _ := strings.Cut(raw, ":")
			add(rawPW)
		}
	}
	for _, p := range strings.Split(u.RawQuery, "&") {
		k, v, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if !hasValue || !IsCredentialParam(name) {
			continue
		}
		add(v)
		if dv, err := url.QueryUnescape(v); err == nil {
			// Libraries re-encode URLs they pass on: catch those spellings too.
			add(dv)
			add(url.QueryEscape(dv))
			add(url.PathEscape(dv))
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// RedactError returns err with every credential of u (see URLSecrets)
// removed from its message, for drivers to apply where they turn a client
// library's errors into their own: some libraries put the URL, or parts of
// it, into their errors. An error whose message shows none of them is
// returned unchanged. Otherwise the returned error still matches what err
// matched with errors.Is (ErrUnavailable, ErrAccessDenied, context errors
// and the like), but does not unwrap to err, whose message still holds the
// credential: errors.As cannot reach the client library's error types
// through it.
func RedactError(err error, u *url.URL) error {
	if err == nil {
		return nil
	}
	return redactSecrets(err, URLSecrets(u))
}

func redactSecrets(err error, secrets []string) error {
	msg := err.Error()
	out := msg
	for _, s := range secrets {
		out = strings.ReplaceAll(out, s, Redacted)
	}
	if out == msg {
		return err
	}
	return &redactedError{msg: out, err: err}
}

// redactedError is an error whose message had credentials removed. It
// matches what the original matched, without exposing it.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

// Is reports whether the original error matches target.
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
