package mongo

import (
	"context"
	"errors"
	"testing"

	gomongo "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/fila-go/fila/backend"
)

func TestMapErr(t *testing.T) {
	d := &Driver{}
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	ferretInterrupt := gomongo.CommandError{Code: 1, Name: "InternalError",
		Message: "[msg_insert.go:168 handler.(*Handler).MsgInsert] [db.go:134 fsql.(*DB).InTransaction] interrupted (9)"}
	cases := []struct {
		name        string
		ctx         context.Context
		err         error
		want        error // errors.Is must hold
		unavailable bool
	}{
		{"interrupted, caller gone", ended, gomongo.CommandError{Code: 11601, Name: "Interrupted"}, context.Canceled, false},
		{"FerretDB interrupt, caller gone", ended, ferretInterrupt, context.Canceled, false},
		{"interrupted", live, gomongo.CommandError{Code: 11601, Name: "Interrupted"}, backend.ErrUnavailable, true},
		{"max time expired", live, gomongo.CommandError{Code: 50, Name: "MaxTimeMSExpired"}, backend.ErrUnavailable, true},
		{"FerretDB interrupt", live, ferretInterrupt, backend.ErrUnavailable, true},
		{"not primary", live, gomongo.CommandError{Code: 10107, Name: "NotWritablePrimary"}, backend.ErrUnavailable, true},
		{"network", live, gomongo.CommandError{Labels: []string{"NetworkError"}}, backend.ErrUnavailable, true},
		{"mongo driver's own timeout", live, context.DeadlineExceeded, backend.ErrUnavailable, true},
		{"other internal error", live, gomongo.CommandError{Code: 1, Name: "InternalError", Message: "disk I/O error"}, nil, false},
		{"bad value", live, gomongo.CommandError{Code: 2, Name: "BadValue"}, nil, false},
		{"disconnected", live, gomongo.ErrClientDisconnected, backend.ErrClosed, false},
		{"lease lost", live, backend.ErrLeaseLost, backend.ErrLeaseLost, false},
	}
	for _, c := range cases {
		got := d.mapErr(c.ctx, c.err, "op")
		if got == nil {
			t.Errorf("%s: nil", c.name)
			continue
		}
		if c.want != nil && !errors.Is(got, c.want) {
			t.Errorf("%s: %v is not %v", c.name, got, c.want)
		}
		if errors.Is(got, backend.ErrUnavailable) != c.unavailable {
			t.Errorf("%s: %v: unavailable %v, want %v", c.name, got, !c.unavailable, c.unavailable)
		}
		if c.ctx == live && c.want != backend.ErrLeaseLost && c.want != backend.ErrClosed {
			var ce gomongo.CommandError
			if _, isCmd := c.err.(gomongo.CommandError); isCmd && !errors.As(got, &ce) || !isCmd && !errors.Is(got, c.err) {
				t.Errorf("%s: %v does not wrap the cause %v", c.name, got, c.err)
			}
		}
	}
}
