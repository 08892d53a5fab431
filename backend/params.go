package backend

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// URLParams reads a driver URL's query parameters and remembers which were
// read, so Done can reject the unknown ones. Typical use in an Opener:
//
//	p := backend.NewURLParams(u)
//	schema := p.String("schema", "fila")
//	poll := p.Duration("poll_interval", 30*time.Second)
//	if err := p.Done(); err != nil { return nil, err }
type URLParams struct {
	q    url.Values
	used map[string]bool
	err  error
}

// NewURLParams wraps u's query.
func NewURLParams(u *url.URL) *URLParams {
	return &URLParams{q: u.Query(), used: map[string]bool{}}
}

// Has reports whether name is present (and marks it known).
func (p *URLParams) Has(name string) bool {
	p.used[name] = true
	_, ok := p.q[name]
	return ok
}

// String returns the parameter or def.
func (p *URLParams) String(name, def string) string {
	p.used[name] = true
	if v, ok := p.q[name]; ok && len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// Duration parses a Go duration ("500ms", "30s"); a bad or negative value is
// remembered as an ErrInvalid error for Done.
func (p *URLParams) Duration(name string, def time.Duration) time.Duration {
	s := p.String(name, "")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		p.fail(name, s, "a non-negative duration such as 500ms or 30s")
		return def
	}
	return d
}

// Int parses a non-negative integer.
func (p *URLParams) Int(name string, def int) int {
	s := p.String(name, "")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		p.fail(name, s, "a non-negative integer")
		return def
	}
	return n
}

// Bool parses true/false/1/0.
func (p *URLParams) Bool(name string, def bool) bool {
	s := p.String(name, "")
	if s == "" {
		return def
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		p.fail(name, s, "true or false")
		return def
	}
	return b
}

func (p *URLParams) fail(name, val, want string) {
	if p.err == nil {
		p.err = Invalidf("URL parameter %s=%q: want %s", name, val, want)
	}
}

// Unused returns the names of parameters nobody read, sorted.
func (p *URLParams) Unused() []string {
	var out []string
	for k := range p.q {
		if !p.used[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Done returns the first parse error, or an ErrInvalid error naming every
// unknown parameter and the known ones.
func (p *URLParams) Done() error {
	if p.err != nil {
		return p.err
	}
	if unk := p.Unused(); len(unk) > 0 {
		known := make([]string, 0, len(p.used))
		for k := range p.used {
			known = append(known, k)
		}
		sort.Strings(known)
		return Invalidf("unknown URL parameter(s) %s (known: %s)", strings.Join(unk, ", "), strings.Join(known, ", "))
	}
	return nil
}

// SplitQuery splits a URL's raw query into the parameters whose names
// start with prefix (in any case), decoded, and the others, each pair
// exactly as written: a driver passes those on to its client library,
// whose own decoding may differ from url.ParseQuery's (libpq's '+' is a
// plus sign). A name that does not decode is an ErrInvalid error.
func SplitQuery(rawQuery, prefix string) (own url.Values, rest []string, err error) {
	var ownRaw []string
	for _, pair := range strings.Split(rawQuery, "&") {
		if pair == "" {
			continue
		}
		rawKey, _, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			return nil, nil, Invalidf("URL query parameter %q: %v", rawKey, err)
		}
		if strings.HasPrefix(strings.ToLower(key), prefix) {
			ownRaw = append(ownRaw, pair)
		} else {
			rest = append(rest, pair)
		}
	}
	own, err = url.ParseQuery(strings.Join(ownRaw, "&"))
	if err != nil {
		return nil, nil, Invalidf("URL query: %v", err)
	}
	return own, rest, nil
}
