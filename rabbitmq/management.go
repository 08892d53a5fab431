package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// The management plugin's HTTP API (Options.ManagementURL) answers what
// AMQP 0-9-1 cannot: which queues exist (QueueList, and the delay queues
// QueueStats counts) and which bindings an exchange has
// (TopicSubscriptions). The driver reads only names from it: the API's
// message counts are sampled (every 5 s by default), so counts stay
// passive declares, which answer at once, and every message operation
// stays on AMQP. Without a management URL, QueueList and
// TopicSubscriptions return fila.ErrUnsupported, as before.
//
// The requests carry the AMQP URL's user and password (the management
// URL's own, when Options.ManagementURL has a user part) in an
// Authorization header; the URL they are sent to, which errors quote, has
// no user part.

// mgmtTimeout bounds one management request when the caller's context has
// no deadline.
const mgmtTimeout = 10 * time.Second

// mgmt is a client of the management API.
type mgmt struct {
	base  string // scheme://host:port/path, no user part, no trailing slash
	user  string
	pass  string
	vhost string
	http  *http.Client
}

// newMgmt builds the management client of o, or nil without a management
// URL.
func newMgmt(o Options) (*mgmt, error) {
	if o.ManagementURL == "" {
		return nil, nil
	}
	u, err := url.Parse(o.ManagementURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, backend.Invalidf("rabbitmq: management URL %q: want http://host:port or https://host:port (the management plugin's address)",
			backend.RedactURL(o.ManagementURL))
	}
	uri, err := amqp.ParseURI(o.URL)
	if err != nil {
		return nil, backend.Invalidf("rabbitmq URL: %v", err)
	}
	// A transport of its own, whose idle connections Close ends.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.TLS != nil && u.Scheme == "https" {
		tr.TLSClientConfig = o.TLS
	}
	m := &mgmt{user: uri.Username, pass: uri.Password, vhost: uri.Vhost, http: &http.Client{Transport: tr}}
	if u.User != nil {
		m.user = u.User.Username()
		m.pass, _ = u.User.Password()
		u.User = nil
	}
	if m.vhost == "" {
		m.vhost = "/"
	}
	u.RawQuery, u.Fragment = "", ""
	m.base = strings.TrimSuffix(u.String(), "/")
	return m, nil
}

// get fetches path (below /api, with the vhost already in it) into out.
func (m *mgmt) get(ctx context.Context, path string, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, mgmtTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/api/"+path, nil)
	if err != nil {
		return backend.Invalidf("rabbitmq: management request: %v", err)
	}
	req.SetBasicAuth(m.user, m.pass)
	resp, err := m.http.Do(req)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ctx.Err()
		}
		return fmt.Errorf("%w: rabbitmq: management API at %s: %v (is the management plugin enabled? rabbitmq-plugins enable rabbitmq_management)",
			backend.ErrUnavailable, m.base, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: rabbitmq: management API at %s refused user %q (HTTP %d): check its password, and give it the management or monitoring tag (rabbitmqctl set_user_tags)",
			fila.ErrInvalid, m.base, m.user, resp.StatusCode)
	case resp.StatusCode == http.StatusNotFound:
		return errNotFound
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%w: rabbitmq: management API at %s answered HTTP %d to GET /api/%s",
			backend.ErrUnavailable, m.base, resp.StatusCode, path)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(out); err != nil {
		return fmt.Errorf("%w: rabbitmq: management API at %s: reading GET /api/%s: %v", backend.ErrUnavailable, m.base, path, err)
	}
	return nil
}

// close ends the client's idle connections.
func (m *mgmt) close() {
	if m != nil {
		m.http.CloseIdleConnections()
	}
}

// errNotFound is a management API 404: the object does not exist.
var errNotFound = errors.New("rabbitmq: management API: not found")

// mgmtPage is how many queue names one request of queueNames asks for.
const mgmtPage = 500

// queueNames returns the names of the vhost's queues that match the
// regular expression re (the broker's: PCRE), a page of mgmtPage at a
// time.
func (m *mgmt) queueNames(ctx context.Context, re string) ([]string, error) {
	var names []string
	for page := 1; ; page++ {
		var r struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
			PageCount int `json:"page_count"`
		}
		q := url.Values{"page": {strconv.Itoa(page)}, "page_size": {strconv.Itoa(mgmtPage)},
			"name": {re}, "use_regex": {"true"}, "columns": {"name"}}
		if err := m.get(ctx, "queues/"+url.PathEscape(m.vhost)+"?"+q.Encode(), &r); err != nil {
			return nil, err
		}
		for _, it := range r.Items {
			names = append(names, it.Name)
		}
		if page >= r.PageCount {
			return names, nil
		}
	}
}

// delayQueues returns the delay queues of every level of the Fila queue n
// names that exist, whoever created them, with their levels and delays.
func (m *mgmt) delayQueues(ctx context.Context, n names) ([]bucket, error) {
	all, err := m.queueNames(ctx, "^"+regexp.QuoteMeta(n.main)+"(:delay:|:p[1-3]:)[0-9]+$")
	if err != nil {
		return nil, err
	}
	var out []bucket
	for _, name := range all {
		rest := strings.TrimPrefix(name, n.main)
		var b bucket
		var ms string
		switch {
		case strings.HasPrefix(rest, delayInfix):
			ms = rest[len(delayInfix):]
		case len(rest) > 4 && strings.HasPrefix(rest, levelInfix) && rest[3] == ':':
			b.level = int(rest[2] - '0')
			ms = rest[4:]
		default:
			continue
		}
		v, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || n.delayAt(b.level, v) != name {
			continue
		}
		b.ms = v
		out = append(out, b)
	}
	return out, nil
}

// mgmtBinding is one binding of an exchange, as the API lists it.
type mgmtBinding struct {
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	RoutingKey      string `json:"routing_key"`
}

// bindingsFrom returns the bindings whose source is the exchange name; none
// when it does not exist.
func (m *mgmt) bindingsFrom(ctx context.Context, name string) ([]mgmtBinding, error) {
	var bs []mgmtBinding
	err := m.get(ctx, "exchanges/"+url.PathEscape(m.vhost)+"/"+url.PathEscape(name)+"/bindings/source", &bs)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	return bs, err
}

// fromManagement is the error of a call that needs the management API
// when the driver has no management URL: capability names what is
// missing, why says why AMQP cannot do it.
func fromManagement(capability, why string) error {
	return fmt.Errorf("%w: rabbitmq: %s needs the management plugin's API (%s): add fila_management_url=http://host:15672 to the URL (Options.ManagementURL)",
		backend.ErrUnsupported, capability, why)
}

// QueueList returns the Fila queues that have a RabbitMQ queue under the
// driver's prefix (a main queue, a level's, a delay queue, the dead
// letters, a mark), from the management API; without a management URL it
// returns fila.ErrUnsupported. A queue that was used and holds nothing is
// listed as long as its main queue exists.
func (d *Driver) QueueList(ctx context.Context) ([]string, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	if d.mgmt == nil {
		return nil, fromManagement("queue listing", "AMQP 0-9-1 cannot list queues")
	}
	all, err := d.mgmt.queueNames(ctx, "^"+regexp.QuoteMeta(d.opts.Prefix+"."))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range all {
		q, ok := d.filaQueue(n)
		if ok && !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out, nil
}

// filaQueue returns the Fila queue a broker object of this driver's prefix
// belongs to: the part of its name between the prefix and the first ':'
// (Fila names have none), when that is a valid queue name.
func (d *Driver) filaQueue(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, d.opts.Prefix+".")
	if !ok {
		return "", false
	}
	q, _, _ := strings.Cut(rest, ":")
	if fila.ValidateQueueName(q) != nil {
		return "", false
	}
	return q, true
}

// subscriptionsFromBindings returns a topic's subscriptions from the
// bindings of its exchanges: P.T:topic binds each subscription without a
// pattern (its router P.Q:levels, or its main queue P.Q for one made
// before levels), P.T:route each pattern subscription's P.Q:sub:H, its
// pattern as the key. A queue bound both ways takes every kind.
func (d *Driver) subscriptionsFromBindings(topic []mgmtBinding, route []mgmtBinding) []backend.Subscription {
	all := map[string]bool{}
	pats := map[string][]string{}
	for _, b := range topic {
		name := strings.TrimSuffix(b.Destination, routerSuffix)
		if b.DestinationType == "queue" {
			name = b.Destination
		}
		if q, ok := d.filaQueue(name); ok && (name == d.opts.Prefix+"."+q) {
			all[q] = true
		}
	}
	for _, b := range route {
		q, ok := d.filaQueue(b.Destination)
		if !ok || b.DestinationType != "exchange" || !strings.Contains(b.Destination, subInfix) {
			continue
		}
		if !slices.Contains(pats[q], b.RoutingKey) {
			pats[q] = append(pats[q], b.RoutingKey)
		}
	}
	var out []backend.Subscription
	for q := range all {
		out = append(out, backend.Subscription{Queue: q})
	}
	for q, ps := range pats {
		if all[q] {
			continue
		}
		slices.Sort(ps)
		out = append(out, backend.Subscription{Queue: q, Patterns: ps})
	}
	slices.SortFunc(out, func(a, b backend.Subscription) int { return strings.Compare(a.Queue, b.Queue) })
	return out
}
