package rabbitmq

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

func init() {
	fila.Register("amqp", Open)
	fila.Register("amqps", Open)
}

// Defaults of Options.
const (
	DefaultPrefix        = "fila"
	DefaultMaxPrefetch   = 250
	DefaultBufferIdle    = time.Second
	DefaultReconnectMax  = 2 * time.Second
	DefaultReconnectWait = 5 * time.Second
)

// Options configure a Driver built with New. The zero value of every field
// means its default.
type Options struct {
	// URL is the broker's amqp:// or amqps:// URL, as amqp091-go parses it
	// (vhost in the path; heartbeat, connection_timeout, channel_max,
	// auth_mechanism, certfile, keyfile, cacertfile and
	// server_name_indication in the query). Required.
	URL string
	// Prefix starts every queue and exchange name the driver makes
	// (default "fila"): the Fila queue "orders" is the RabbitMQ queue
	// "fila.orders". At most 109 bytes of ASCII letters, digits, '.', '_'
	// and '-'. URL parameter fila_prefix.
	Prefix string
	// MaxPrefetch caps the prefetch (basic.qos) of the driver's consumers
	// (default 250, at most 65535). The prefetch follows demand: a consumer
	// is started with the sum of the Max of the Receive calls waiting, up to
	// this cap. URL parameter fila_prefetch.
	MaxPrefetch int
	// BufferIdle is how long messages the broker pushed to this client may
	// wait in its buffer with no Receive waiting before the driver gives them
	// back to the queue for other consumers (default 1s), and how long an
	// idle consumer keeps credit no message was pushed for before it is
	// cancelled, so that it pulls in nothing others wait for. A give-back counts
	// as a delivery on RabbitMQ before 4.3, which this client takes off when
	// the message comes back to it but another does not, so a short
	// BufferIdle on a busy machine with several consumers (where a Receive can
	// come late) costs attempts. URL parameter fila_buffer_idle.
	BufferIdle time.Duration
	// ReconnectMax caps the backoff between reconnection attempts (default
	// 2s, so calls resume within about 2s of the broker answering again;
	// the first retry is after 100ms). URL parameter fila_reconnect_max.
	ReconnectMax time.Duration
	// ReconnectWait is how long a call made while the connection is down
	// waits for the reconnection before failing with fila.ErrUnavailable (default
	// 5s; a Receive keeps waiting until its context ends). URL parameter
	// fila_reconnect_wait.
	ReconnectWait time.Duration
	// ConnectionName is the connection name RabbitMQ shows for this driver's
	// connections (default "fila"). URL parameter fila_connection_name.
	ConnectionName string
	// Hosts are the other nodes of a RabbitMQ cluster, as "host:port": a
	// connection goes to URL's host first and, when that node does not
	// answer, to the next of these in turn (same credentials, vhost and
	// parameters); after a lost connection the driver dials the next node
	// first, so it moves away from a node that died. URL parameter
	// fila_hosts, comma-separated.
	Hosts []string
	// TLS, when set, is used for amqps URLs instead of the configuration
	// built from the URL's certfile/keyfile/cacertfile parameters.
	TLS *tls.Config
	// ManagementURL is the address of the management plugin's HTTP API,
	// such as http://127.0.0.1:15672 (default: none). With it, QueueList
	// and TopicSubscriptions answer (AMQP 0-9-1 cannot list queues or
	// bindings); without it they return fila.ErrUnsupported. Its requests
	// use URL's user and password unless ManagementURL has a user part
	// of its own; the URL parameter fila_management_url takes none (put
	// the credentials in the amqp URL). URL parameter fila_management_url.
	ManagementURL string
	// Logger receives the driver's own events (reconnections, background
	// failures). Default slog.Default().
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MaxPrefetch <= 0 {
		o.MaxPrefetch = DefaultMaxPrefetch
	}
	if o.BufferIdle <= 0 {
		o.BufferIdle = DefaultBufferIdle
	}
	if o.ReconnectMax <= 0 {
		o.ReconnectMax = DefaultReconnectMax
	}
	if o.ReconnectWait <= 0 {
		o.ReconnectWait = DefaultReconnectWait
	}
	if o.ConnectionName == "" {
		o.ConnectionName = "fila"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *Options) validate() error {
	if o.URL == "" {
		return backend.Invalidf("rabbitmq: Options.URL is empty")
	}
	for _, h := range o.Hosts {
		if _, port, err := net.SplitHostPort(h); err != nil || port == "" {
			return backend.Invalidf("rabbitmq: host %q of Options.Hosts (fila_hosts): want host:port", h)
		}
	}
	if _, err := amqp.ParseURI(o.URL); err != nil {
		// amqp091 would refuse it at every dial; it is the URL that is
		// wrong, not the broker that is away.
		err = backend.Invalidf("rabbitmq URL: %v", err)
		if u, perr := url.Parse(o.URL); perr == nil {
			err = backend.RedactError(err, u)
		}
		return err
	}
	if len(o.Prefix) > maxPrefix {
		return backend.Invalidf("rabbitmq: prefix is %d bytes; the limit is %d, so that every derived queue name (%s) fits RabbitMQ's %d bytes",
			len(o.Prefix), maxPrefix, "P.Q:delay:MS", maxNameLen)
	}
	if err := fila.ValidateQueueName(o.Prefix); err != nil {
		return fmt.Errorf("rabbitmq: prefix %q: %w", o.Prefix, err)
	}
	if o.MaxPrefetch > 65535 {
		return backend.Invalidf("rabbitmq: max prefetch %d is above AMQP's limit 65535", o.MaxPrefetch)
	}
	return nil
}

// amqpParams are the query parameters amqp091-go reads; they are passed
// through to it unchanged.
var amqpParams = []string{"heartbeat", "connection_timeout", "channel_max", "auth_mechanism",
	"certfile", "keyfile", "cacertfile", "server_name_indication"}

// Open opens a driver from an amqp:// or amqps:// URL. Parameters starting
// with "fila_" configure the driver (fila_prefix, fila_prefetch,
// fila_buffer_idle, fila_reconnect_max, fila_reconnect_wait,
// fila_connection_name, fila_hosts, fila_management_url; see Options);
// amqp091-go's own parameters (heartbeat, connection_timeout, channel_max,
// auth_mechanism, certfile, keyfile, cacertfile,
// server_name_indication) pass through to it; anything else is ErrInvalid.
// The driver logs to oo.Logger (nil: slog.Default()).
func Open(ctx context.Context, u *url.URL, oo backend.OpenOptions) (_ backend.Driver, err error) {
	// amqp091 may put parts of the URL (a key file's path) into its errors.
	defer func() { err = backend.RedactError(err, u) }()
	p := backend.NewURLParams(u)
	o := Options{Logger: oo.Logger}
	o.Prefix = p.String("fila_prefix", DefaultPrefix)
	o.MaxPrefetch = p.Int("fila_prefetch", DefaultMaxPrefetch)
	o.BufferIdle = p.Duration("fila_buffer_idle", DefaultBufferIdle)
	o.ReconnectMax = p.Duration("fila_reconnect_max", DefaultReconnectMax)
	o.ReconnectWait = p.Duration("fila_reconnect_wait", DefaultReconnectWait)
	o.ConnectionName = p.String("fila_connection_name", "fila")
	o.ManagementURL = p.String("fila_management_url", "")
	if mu, err := url.Parse(o.ManagementURL); o.ManagementURL != "" && (err != nil || mu.User != nil) {
		// A password in a query parameter would be quoted wherever the
		// URL is (redaction knows the amqp URL's user part).
		return nil, backend.Invalidf("rabbitmq: fila_management_url must be a plain http(s)://host:port without a user part or a password (the driver uses the amqp URL's credentials)")
	}
	if hosts := p.String("fila_hosts", ""); hosts != "" {
		for _, h := range strings.Split(hosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				o.Hosts = append(o.Hosts, h)
			}
		}
	}
	for _, name := range amqpParams {
		p.Has(name)
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	if s := strings.ToLower(u.Scheme); s != "amqp" && s != "amqps" {
		return nil, backend.Invalidf("rabbitmq: URL scheme %q: want amqp or amqps", u.Scheme)
	}
	raw := *u
	q := raw.Query()
	for k := range q {
		if strings.HasPrefix(k, "fila_") {
			q.Del(k)
		}
	}
	raw.RawQuery = q.Encode()
	o.URL = raw.String()
	d, err := New(ctx, o)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return d, nil
}

// dialConfig is the amqp091-go configuration of every connection.
func (d *Driver) dialConfig() amqp.Config {
	cfg := amqp.Config{
		Properties:      amqp.NewConnectionProperties(),
		TLSClientConfig: d.opts.TLS,
	}
	cfg.Properties.SetClientConnectionName(d.opts.ConnectionName)
	return cfg
}
