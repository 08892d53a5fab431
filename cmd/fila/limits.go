package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
)

// limitsFlags are the flags of fila queue limits.
type limitsFlags struct {
	concurrency, rate, burst int
	per                      time.Duration
	none, json               bool
}

func newQueueLimitsCmd(a *app) *cobra.Command {
	var f limitsFlags
	cmd := &cobra.Command{
		Use:   "limits QUEUE",
		Short: "Show or set a queue's concurrency and rate limits, obeyed by every worker",
		Long: `Show a queue's flow control limits and how many of its concurrency slots are
held now (one per message leased under the limit, by any client; a client
may keep a freed slot for its next message for up to its control interval),
or set them with the flags. The limits are stored in the broker: every client of
every process obeys them within its control interval (1s by default), so a
limit bounds the queue's work across all workers together.

--concurrency N lets at most N of the queue's messages be leased at once
(at most 10000). --rate N hands out at most N messages per --per (default
1s, whole milliseconds from 1ms to 24h; at most 100000), and --burst N lets
N go at once after a quiet spell (default 1): any window of length W holds
at most W*N/per + burst deliveries. Flags not given keep the queue's current
values; --concurrency 0 removes the concurrency limit, --rate 0 the rate
limit, --none every limit. Setting prints the limits now in force.

Lowering the concurrency limit applies as the running messages settle: none
is stopped. A slot whose holder crashed is freed shortly after its message's
lease expires. Drivers that cannot list marks (RabbitMQ) exit 4.`,
		Example: `  fila queue limits emails
  fila queue limits emails --concurrency 5
  fila queue limits emails --rate 50 --burst 10
  fila queue limits emails --rate 600 --per 1m
  fila queue limits emails --rate 0
  fila queue limits emails --none
  fila queue limits emails --json`,
		Args: oneQueueArg("limits"),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if err := fila.ValidateQueueName(q); err != nil {
				return err
			}
			set, err := f.check(cmd)
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				u, err := c.QueueLimitsUsage(ctx, q)
				if err != nil {
					return limitsErr(err)
				}
				if !set {
					return writeLimits(a.stdout, q, u, f.json, false)
				}
				want, err := f.apply(cmd, u.Limits)
				if err != nil {
					return err
				}
				if err := c.QueueLimitsSet(ctx, q, want); err != nil {
					if errors.Is(err, fila.ErrInvalid) {
						return fmt.Errorf("%w; nothing changed, queue %q keeps %s (see 'fila queue limits --help' for the ranges)", err, q, limitsText(u.Limits))
					}
					return limitsErr(err)
				}
				now, err := c.QueueLimitsUsage(ctx, q)
				if err != nil {
					return fmt.Errorf("limits of queue %q set to %s, but reading them back failed: %w\nRun fila queue limits %s to see them.", q, limitsText(normalizedLimits(want)), err, q)
				}
				if now.Limits != normalizedLimits(want) {
					a.warnf("another client changed the limits of queue %q meanwhile: %s is in force, not %s", q, limitsText(now.Limits), limitsText(normalizedLimits(want)))
				}
				return writeLimits(a.stdout, q, now, f.json, true)
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.concurrency, "concurrency", 0, "at most N messages leased at once across all workers (0: no limit)")
	fl.IntVar(&f.rate, "rate", 0, "at most N messages handed out per --per (0: no limit)")
	fl.DurationVar(&f.per, "per", 0, "the rate's period, 1ms to 24h (default 1s when a rate is first set)")
	fl.IntVar(&f.burst, "burst", 0, "how many may go at once after a quiet spell (default 1 when a rate is first set)")
	fl.BoolVar(&f.none, "none", false, "remove every limit of the queue")
	fl.BoolVar(&f.json, "json", false, "print JSON instead of a line")
	return cmd
}

// check validates the setting flags given, before anything is read, and
// reports whether any was given.
func (f *limitsFlags) check(cmd *cobra.Command) (set bool, err error) {
	fl := cmd.Flags()
	var given []string
	for _, name := range []string{"concurrency", "rate", "per", "burst"} {
		if fl.Changed(name) {
			given = append(given, "--"+name)
		}
	}
	if f.none {
		if len(given) > 0 {
			return false, usagef("--none removes every limit: it cannot be combined with %s (drop --none to change single limits)", given[0])
		}
		return true, nil
	}
	switch {
	case fl.Changed("concurrency") && (f.concurrency < 0 || f.concurrency > fila.MaxConcurrencyLimit):
		return false, usagef("--concurrency %d must be between 0 (no limit) and %d", f.concurrency, fila.MaxConcurrencyLimit)
	case fl.Changed("rate") && (f.rate < 0 || f.rate > fila.MaxRateLimit):
		return false, usagef("--rate %d must be between 0 (no limit) and %d", f.rate, fila.MaxRateLimit)
	case fl.Changed("per") && (f.per < time.Millisecond || f.per > 24*time.Hour || f.per%time.Millisecond != 0):
		return false, usagef("--per %v must be whole milliseconds from 1ms to 24h (for example 1s, 500ms, 1m)", f.per)
	case fl.Changed("burst") && (f.burst < 1 || f.burst > fila.MaxRateBurst):
		return false, usagef("--burst %d must be between 1 and %d", f.burst, fila.MaxRateBurst)
	case fl.Changed("rate") && f.rate == 0 && (fl.Changed("per") || fl.Changed("burst")):
		return false, usagef("--rate 0 removes the rate limit: drop --per and --burst, or give a rate")
	}
	return len(given) > 0, nil
}

// apply returns cur changed by the flags given.
func (f *limitsFlags) apply(cmd *cobra.Command, cur fila.QueueLimits) (fila.QueueLimits, error) {
	if f.none {
		return fila.QueueLimits{}, nil
	}
	fl := cmd.Flags()
	l := cur
	if fl.Changed("concurrency") {
		l.Concurrency = f.concurrency
	}
	if fl.Changed("rate") {
		l.Rate = f.rate
	}
	if fl.Changed("per") {
		l.Per = f.per
	}
	if fl.Changed("burst") {
		l.Burst = f.burst
	}
	if l.Rate == 0 {
		if fl.Changed("per") || fl.Changed("burst") {
			return l, usagef("--per and --burst shape a rate limit, and the queue has none: add --rate N")
		}
		l.Per, l.Burst = 0, 0 // --rate 0 drops the period and burst too
	}
	return l, nil
}

// normalizedLimits fills in the defaults of QueueLimits, as the broker
// stores them: a second for Per and one for Burst when there is a rate.
func normalizedLimits(l fila.QueueLimits) fila.QueueLimits {
	if l.Rate == 0 {
		l.Per, l.Burst = 0, 0
		return l
	}
	if l.Per == 0 {
		l.Per = time.Second
	}
	if l.Burst == 0 {
		l.Burst = 1
	}
	return l
}

// limitsText is l for a sentence: "concurrency 5, rate 50/1s burst 10" or
// "no limits".
func limitsText(l fila.QueueLimits) string {
	if l.IsZero() {
		return "no limits"
	}
	return l.String()
}

// limitsErr adds what to do next to an error of reading or setting limits.
func limitsErr(err error) error {
	if errors.Is(err, fila.ErrUnsupported) {
		return fmt.Errorf("%w\nQueue limits need a driver that can list marks (PostgreSQL, MySQL, Redis, MongoDB); on this broker bound the work in the workers instead (worker.QueueConfig.Concurrency).", err)
	}
	return err
}

// writeLimits prints u, the limits of queue q, as JSON or as a line:
// `queue "emails": concurrency 5 (3 held), rate 50/1s burst 10`, or after
// a set `set queue "emails": concurrency 5, rate 50/1s burst 10`.
func writeLimits(w io.Writer, q string, u fila.LimitsUsage, asJSON, set bool) error {
	l := u.Limits
	if asJSON {
		return writeJSONLine(w, struct {
			Queue string `json:"queue"`
			// Concurrency and Rate are 0 when there is no such limit;
			// PerMS and Burst are 0 without a rate.
			Concurrency int   `json:"concurrency"`
			Held        int   `json:"held"`
			Rate        int   `json:"rate"`
			PerMS       int64 `json:"per_ms"`
			Burst       int   `json:"burst"`
		}{q, l.Concurrency, u.Held, l.Rate, l.Per.Milliseconds(), l.Burst})
	}
	if set {
		_, err := fmt.Fprintf(w, "set queue %q: %s\n", q, limitsText(l))
		return err
	}
	text := limitsText(l)
	if l.Concurrency > 0 {
		text = fmt.Sprintf("concurrency %d (%d held)", l.Concurrency, u.Held)
		if l.Rate > 0 {
			text += ", " + fila.QueueLimits{Rate: l.Rate, Per: l.Per, Burst: l.Burst}.String()
		}
	}
	_, err := fmt.Fprintf(w, "queue %q: %s\n", q, text)
	return err
}
