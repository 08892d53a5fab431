package filatest_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/filatest"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
)

// TestOpenRefusesUnknownParameters holds every registered scheme to the
// Opener contract (backend.Opener): a query parameter the driver does not
// know is an ErrInvalid error, whether the driver checks it before
// connecting or the broker refuses it, and the error names the parameter
// but never the URL's password. Hosts are the test servers, for drivers
// that reach the broker before the parameter is refused.
//
// MySQL is such a driver: parameters that are not Fila's go to
// go-sql-driver/mysql, which sets an unknown one as a session variable
// after logging in, and the server refuses it. Unlike PostgreSQL's trust
// authentication, MySQL refuses a password for a user that has none (root
// on scripts/services' MariaDB), so its row keeps the URL's credentials:
// the password check runs only when the URL has a password of its own (the
// container's).
func TestOpenRefusesUnknownParameters(t *testing.T) {
	const param = "tokne" // a misspelt token: its value may be a secret
	withScheme := func(scheme string, raw func(testing.TB) string) func(testing.TB) string {
		return func(tb testing.TB) string {
			u, err := url.Parse(raw(tb))
			if err != nil {
				tb.Fatalf("test URL: %v", err)
			}
			u.Scheme = scheme
			return u.String()
		}
	}
	literal := func(raw string) func(testing.TB) string { return func(testing.TB) string { return raw } }
	rows := []struct {
		scheme string
		url    func(testing.TB) string
	}{
		{"mem", literal("mem://open-params")},
		{"postgres", withScheme("postgres", brokerURL(filatest.Postgres))},
		{"postgresql", withScheme("postgresql", brokerURL(filatest.Postgres))},
		{"redis", withScheme("redis", brokerURL(filatest.Redis))},
		{"rediss", withScheme("rediss", brokerURL(filatest.Redis))},
		{"amqp", withScheme("amqp", brokerURL(filatest.RabbitMQ))},
		{"amqps", withScheme("amqps", brokerURL(filatest.RabbitMQ))},
		{"mongodb", withScheme("mongodb", brokerURL(filatest.Mongo))},
		// The check comes before the SRV lookup, so no SRV record is needed.
		{"mongodb+srv", literal("mongodb+srv://nosuchhost.invalid/")},
		{"mysql", withScheme("mysql", brokerURL(filatest.MySQL))},
	}
	// The schemes whose rows log in with the URL's user and password as
	// they are, instead of giving the URL a password to look for.
	ownCredentials := map[string]bool{"mysql": true}
	var covered []string
	for _, r := range rows {
		covered = append(covered, r.scheme)
	}
	for _, s := range fila.Schemes() {
		if !slices.Contains(covered, s) {
			t.Errorf("scheme %s is registered but has no row here", s)
		}
	}
	for _, r := range rows {
		t.Run(r.scheme, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(r.url(t))
			if err != nil {
				t.Fatal(err)
			}
			var secret string
			if ownCredentials[r.scheme] {
				secret = ownPassword(u)
			} else {
				secret = withPassword(u)
			}
			q := u.Query()
			q.Set(param, "abc")
			u.RawQuery = q.Encode()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := fila.Open(ctx, u.String())
			if err == nil {
				_ = c.Close()
				t.Fatalf("Open(%s) succeeded; want ErrInvalid for ?%s=", fila.Redact(u.String()), param)
			}
			if !errors.Is(err, fila.ErrInvalid) {
				t.Errorf("Open with ?%s=: %v; want an error matching fila.ErrInvalid", param, err)
			}
			if !strings.Contains(err.Error(), param) {
				t.Errorf("Open with ?%s=: %v; want the parameter named", param, err)
			}
			if secret == "" {
				t.Logf("the URL has no password to look for in the error")
			} else if strings.Contains(err.Error(), secret) {
				t.Errorf("Open with ?%s=: the error shows the URL's password: %v", param, err)
			}
		})
	}
}

// withPassword gives u a password that is easy to find in an error, and
// returns it. A password the URL has already (its server may need it) is
// kept, unless it could appear in an error for another reason (it is the
// user name, as in guest:guest, or too short to look for): the drivers
// that check the parameter before connecting never use it, and
// PostgreSQL, whose broker refuses it, runs on a server that needs no
// password in the test setup or has one of its own (MySQL's row keeps the
// URL's credentials instead: see TestOpenRefusesUnknownParameters).
func withPassword(u *url.URL) string {
	user := "fila"
	if u.User != nil {
		user = u.User.Username()
		if pw, ok := u.User.Password(); ok && pw != user && len(pw) >= 6 {
			return pw
		}
	}
	const secret = "pw-S3cret-f1la"
	u.User = url.UserPassword(user, secret)
	return secret
}

// ownPassword returns u's password when it is one to look for in an error
// (as withPassword keeps it), or "".
func ownPassword(u *url.URL) string {
	if u.User == nil {
		return ""
	}
	if pw, ok := u.User.Password(); ok && pw != u.User.Username() && len(pw) >= 6 {
		return pw
	}
	return ""
}

// brokerURL returns the URL of a test server of broker (filatest.URL; this
// package's tests do not import internal/testenv, whose skip hint would
// change the lines TestSkipReport checks).
func brokerURL(broker string) func(testing.TB) string {
	return func(tb testing.TB) string { tb.Helper(); return filatest.URL(tb, broker) }
}
