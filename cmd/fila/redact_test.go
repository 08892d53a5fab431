package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
)

// secretURLs are URLs of every scheme carrying credentials, in the user
// part and in query parameters, each credential containing "S3cret". Hosts
// are closed ports or names that do not resolve, so nothing is reached.
var secretURLs = []string{
	"mem://user:S3cretUser@x?password=S3cretPW",
	"postgres://u@127.0.0.1:1/db?password=S3cretPW&sslmode=disable",
	"postgres://u:S3cret%26User@127.0.0.1:1/db?sslpassword=S3cretSSL&sslkey=/keys/S3cretKey.pem&sslmode=disable",
	"postgresql://u@127.0.0.1:1/db?PassWord=S3cretMixedCase&sslmode=disable",
	"redis://:S3cretUser@127.0.0.1:1/0",
	"redis://u:S3cretUser@127.0.0.1:1/0?password=S3cretPW",
	"rediss://default:S3cretUser@127.0.0.1:1/0?token=S3cretToken",
	"amqp://guest:S3cretUser@127.0.0.1:1/?secret=S3cretSecret",
	"amqps://guest:S3cretUser@127.0.0.1:1/?keyfile=/keys/S3cretKey.pem&certfile=/keys/cert.pem",
	"mongodb://u:S3cretUser@127.0.0.1:1/?serverSelectionTimeoutMS=300&tlsCertificateKeyFilePassword=S3cretPW",
	"mongodb://u@127.0.0.1:1/?serverSelectionTimeoutMS=300&authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:S3cretToken",
	"mongodb+srv://u:S3cretUser@fila-test.invalid/?api_signature=S3cretSig&x_credential=S3cretCred",
	"mysql://u:S3cret%26User@127.0.0.1:1/db?timeout=2s",
	"mysql://u@127.0.0.1:1/db?serverPubKey=S3cretKey&timeout=2s",
}

// badParams make each URL invalid: an unknown Fila parameter, and a bad
// value for the broker client library's own parsing.
var badParams = []string{"fila_bogus=1", "sslmode=bogus", "db=notanumber", "heartbeat=x", "maxPoolSize=many", "protocol=9", "readTimeout=x"}

func withQuery(raw, kv string) string {
	if strings.Contains(raw, "?") {
		return raw + "&" + kv
	}
	return raw + "?" + kv
}

// TestCredentialsNeverShown: for a table of URLs of every scheme, with
// credentials in the user part and in query parameters, neither fila.Redact,
// nor the error of fila.Open against an unreachable host or with a bad
// parameter, nor the command's standard error shows a credential.
func TestCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, what, got string) {
		t.Helper()
		if strings.Contains(got, "S3cret") {
			t.Errorf("%s shows a credential: %s", what, got)
		}
	}
	for _, raw := range secretURLs {
		t.Run(fila.Redact(raw), func(t *testing.T) {
			t.Parallel()
			check(t, "Redact", fila.Redact(raw))
			for _, u := range append([]string{raw}, func() []string {
				var out []string
				for _, p := range badParams {
					out = append(out, withQuery(raw, p))
				}
				return out
			}()...) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				c, err := fila.Open(ctx, u)
				cancel()
				if err == nil {
					_ = c.Close()
					if !strings.HasPrefix(u, "mem:") {
						t.Errorf("Open(%s) succeeded", fila.Redact(u))
					}
					continue
				}
				check(t, "the error of Open("+fila.Redact(u)+")", err.Error())
				r := cli(t, "", "--url", u, "--connect-timeout", "5s", "stats", "q")
				check(t, "the command's stderr for "+fila.Redact(u), r.stderr)
				check(t, "the command's stdout for "+fila.Redact(u), r.stdout)
			}
		})
	}
}

// TestCredentialsNeverShownUnparsable: a URL that does not parse (a
// password whose host and '@' are missing reads as a port) is not echoed.
func TestCredentialsNeverShownUnparsable(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"postgres://u:S3cretPW/db", "redis://:S3cret PW@h/0", "amqp://u:S3cret%zz@h/"} {
		if got := fila.Redact(raw); strings.Contains(got, "S3cret") {
			t.Errorf("Redact(%q) = %q", raw, got)
		}
		_, err := fila.Open(context.Background(), raw)
		if err == nil || strings.Contains(err.Error(), "S3cret") {
			t.Errorf("Open of an unparsable URL: %v; want an error without the password", err)
		}
		r := cli(t, "", "--url", raw, "stats", "q")
		if r.code != exitUsage || strings.Contains(r.stderr, "S3cret") {
			t.Errorf("fila --url <unparsable> stats: exit %d, stderr %q; want exit 2 without the password", r.code, r.stderr)
		}
	}
}
