package fila

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/fila-go/fila/backend"
)

var registry struct {
	sync.RWMutex
	openers map[string]backend.Opener
}

// Register makes a driver available to Open under a URL scheme. Drivers call
// it from init, so importing a driver package for its side effect is enough:
//
//	import _ "github.com/fila-go/fila/postgres"
//
// Register panics if opener is nil or the scheme is taken, like sql.Register.
func Register(scheme string, opener backend.Opener) {
	if opener == nil {
		panic("fila: Register opener is nil")
	}
	scheme = strings.ToLower(scheme)
	registry.Lock()
	defer registry.Unlock()
	if registry.openers == nil {
		registry.openers = map[string]backend.Opener{}
	}
	if _, dup := registry.openers[scheme]; dup {
		panic("fila: Register called twice for scheme " + scheme)
	}
	registry.openers[scheme] = opener
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.openers))
	for s := range registry.openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// knownDrivers maps schemes to the package that registers them, for the
// error message of a missing import.
var knownDrivers = map[string]string{
	"mem":         "github.com/fila-go/fila/memory",
	"postgres":    "github.com/fila-go/fila/postgres",
	"postgresql":  "github.com/fila-go/fila/postgres",
	"redis":       "github.com/fila-go/fila/redis",
	"rediss":      "github.com/fila-go/fila/redis",
	"amqp":        "github.com/fila-go/fila/rabbitmq",
	"amqps":       "github.com/fila-go/fila/rabbitmq",
	"mongodb":     "github.com/fila-go/fila/mongo",
	"mongodb+srv": "github.com/fila-go/fila/mongo",
	"mysql":       "github.com/fila-go/fila/mysql",
}

// Open opens a client for the broker named by rawURL's scheme: mem://,
// postgres://, mysql://, redis://, amqp://, mongodb:// (and their TLS variants). The
// driver package must be imported (for its side effect) to register its
// scheme. Query parameters configure the driver; unknown ones are an error.
//
// The logger of WithLogger (default slog.Default()) is passed to the driver,
// so the driver's own log lines, and those of the broker's client library
// where they can be routed, go to it too.
//
// Open connects to the broker and checks that it answers before it returns,
// like sql.Open followed by Ping, within ctx: a broker that cannot be
// reached fails here with an error matching ErrUnavailable (and, when ctx
// ended first, ctx's error as well), refused credentials with
// ErrAccessDenied, a bad URL or parameter with ErrInvalid. Once open, a
// client survives broker outages: calls fail with ErrUnavailable meanwhile
// and the driver reconnects by itself.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, invalidf("broker URL: %v", redactErr(err))
	}
	if u.Scheme == "" {
		return nil, invalidf("broker URL %q has no scheme; known schemes: %s", Redact(rawURL), strings.Join(Schemes(), ", "))
	}
	scheme := strings.ToLower(u.Scheme)
	registry.RLock()
	opener := registry.openers[scheme]
	registry.RUnlock()
	if opener == nil {
		msg := fmt.Sprintf("no driver registered for scheme %q (registered: %s)", scheme, strings.Join(Schemes(), ", "))
		if pkg, ok := knownDrivers[scheme]; ok {
			msg += fmt.Sprintf(`; add import _ %q`, pkg)
		}
		return nil, invalidf("%s", msg)
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	drv, err := opener(ctx, u, backend.OpenOptions{Logger: o.logger})
	if err != nil {
		// Drivers keep credentials out of their errors; this catches what a
		// client library put there anyway.
		err = backend.RedactError(err, u)
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) && !errors.Is(err, ErrUnavailable) {
			// The broker did not answer in time: still a broker that
			// cannot be reached, and the context's error too.
			err = fmt.Errorf("%w: the broker did not answer before the context ended: %w", ErrUnavailable, err)
		}
		return nil, fmt.Errorf("open %s: %w", Redact(rawURL), err)
	}
	c, err := New(drv, opts...)
	if err != nil {
		_ = drv.Close() // cannot happen: the options were checked above
		return nil, err
	}
	return c, nil
}

// Redact returns rawURL with its credentials replaced by "xxxxx", for logs
// and errors: the password of the user part and the value of every
// credential-bearing query parameter, that is one whose name contains, in
// any case, pass, pwd, secret, token, key, credential or signature
// (password, sslpassword, sslkey, keyfile, tlsCertificateKeyFilePassword,
// …) or MongoDB's authMechanismProperties. A URL that does not parse is
// replaced whole.
func Redact(rawURL string) string { return backend.RedactURL(rawURL) }

// quoted matches the parts of the URL that url.Parse quotes in its errors
// (an "invalid port" may be a password whose host and '@' are missing).
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// redactErr drops the URL text url.Parse puts into its errors, and the
// pieces of it that they quote: either may carry a password.
func redactErr(err error) error {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	return errors.New(quoted.ReplaceAllString(err.Error(), `"`+backend.Redacted+`"`))
}
