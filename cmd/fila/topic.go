package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/fila-go/fila"
)

func newTopicCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Fan-out: subscribe queues to a topic, list them, publish, rewind, unsubscribe",
		Long: `A topic copies every message published to it into each queue subscribed to it
at that moment. A subscription is a queue: its copies are received, retried,
dead-lettered, counted and cancelled as any queue's messages are (fila stats,
fila dead, fila message cancel, workers), and each copy has an id of its own,
fila.CopyID(published id, queue).`,
	}
	cmd.AddCommand(newTopicSubscribeCmd(a), newTopicUnsubscribeCmd(a), newTopicListCmd(a), newTopicPublishCmd(a), newTopicRewindCmd(a))
	return cmd
}

// checkTopic validates a topic name given on the command line, with a
// message that names the topic rule (fila.ValidateTopicName's speaks of the
// queue-name rule it shares).
func checkTopic(topic string) error {
	if err := fila.ValidateTopicName(topic); err != nil {
		return fmt.Errorf("%w: topic name %q: use 1 to %d bytes of letters, digits, '.', '_' and '-', starting with a letter or digit",
			fila.ErrInvalid, topic, fila.MaxTopicNameLen)
	}
	return nil
}

// cannotListSubscriptions reports whether err says that the driver keeps
// subscriptions but cannot list them (RabbitMQ), as opposed to a driver
// without topics at all.
func cannotListSubscriptions(err error) bool {
	var ue *fila.UnsupportedError
	return errors.As(err, &ue) && ue.Capability == "listing subscriptions"
}

// topicArgs checks that a topic command got TOPIC and, with queue, QUEUE.
func topicArgs(verb string, queue bool) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case queue && len(args) != 2:
			return usagef("name a topic and a queue (fila topic %s TOPIC QUEUE)", verb)
		case !queue && len(args) != 1:
			return usagef("name one topic (fila topic %s TOPIC)", verb)
		}
		return nil
	}
}

func newTopicSubscribeCmd(a *app) *cobra.Command {
	var pattern string
	cmd := &cobra.Command{
		Use:   "subscribe TOPIC QUEUE [--pattern PATTERN]",
		Short: "Make a queue a subscription of a topic: it gets a copy of every message published after",
		Long: `Make QUEUE a subscription of TOPIC: every message published to TOPIC after the
command returns is copied into QUEUE; messages published before are not.
One queue may subscribe to several topics. Queue names starting with
"fila.topic." are kept for topics. Drivers that cannot keep subscriptions
exit 4.

With --pattern, QUEUE takes only the messages whose kind matches PATTERN, in
the syntax of AMQP topic exchanges over the kind's dot-separated words: "*"
is exactly one word, "#" zero or more. Subscribing again adds the pattern
(QUEUE then takes the kinds any of its patterns matches); subscribing without
--pattern makes it take every kind. To narrow a subscription, unsubscribe it
(which deletes the queue) and subscribe it again.`,
		Example: `  fila topic subscribe orders orders.email
  fila topic subscribe orders orders.refunds --pattern 'order.*.refunded'
  fila topic subscribe orders orders.brazil --pattern '*.brazil.#'`,
		Args: topicArgs("subscribe", true),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic, q := args[0], args[1]
			if err := checkTopic(topic); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				if err := c.TopicSubscribe(ctx, topic, q, fila.KindPattern(pattern)); err != nil {
					return err
				}
				if pattern != "" {
					_, err := fmt.Fprintf(a.stdout, "subscribed queue %q to the kinds of topic %q matching %q\n", q, topic, pattern)
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "subscribed queue %q to topic %q\n", q, topic)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&pattern, "pattern", "", "take only the messages whose kind matches this pattern (\"*\" one word, \"#\" zero or more)")
	return cmd
}

func newTopicRewindCmd(a *app) *cobra.Command {
	var to string
	var ago time.Duration
	cmd := &cobra.Command{
		Use:   "rewind TOPIC QUEUE (--to TIME | --ago DURATION)",
		Short: "Deliver a subscription's messages again from a point in time",
		Long: `Move subscription QUEUE of TOPIC to a point in time: the topic's messages
published from then on are delivered to QUEUE again (at attempt 1), those
before are not; a point after the newest message skips what QUEUE has not
read yet. Only messages the broker still keeps come back: PostgreSQL's log
mode (fila_mode=log) keeps them for its fila_topic_retention. QUEUE's
deliveries of the messages delivered again end (their acks report the lease
lost); the topic's other subscriptions are untouched. Drivers that cannot
rewind exit 4.`,
		Example: `  fila topic rewind orders orders.audit --ago 2h
  fila topic rewind orders orders.audit --to 2026-12-03T09:00:00Z`,
		Args: topicArgs("rewind", true),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic, q := args[0], args[1]
			if err := checkTopic(topic); err != nil {
				return err
			}
			var at time.Time
			switch {
			case to != "" && ago != 0:
				return usagef("give --to or --ago, not both")
			case to != "":
				t, err := time.Parse(time.RFC3339, to)
				if err != nil {
					return usagef("--to %q is not an RFC 3339 time (2026-01-02T15:04:05Z)", to)
				}
				at = t
			case ago > 0:
				at = time.Now().Add(-ago)
			default:
				return usagef("say where to rewind to: --to TIME (RFC 3339) or --ago DURATION (2h, 30m)")
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				if err := c.TopicRewind(ctx, topic, q, at); err != nil {
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "rewound queue %q of topic %q to %s\n", q, topic, at.UTC().Format(time.RFC3339))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "deliver again the messages published from this RFC 3339 time on")
	f.DurationVar(&ago, "ago", 0, "deliver again the messages published within this duration before now")
	return cmd
}

func newTopicUnsubscribeCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "unsubscribe TOPIC QUEUE",
		Short: "End a subscription and DELETE its queue with everything it holds, after a confirmation prompt",
		Long: `End QUEUE's subscription to TOPIC and delete QUEUE with everything it holds:
its pending copies, its dead letters and its dedup keys, copies from other
topics it subscribes to included; they are not processed. Nothing published
after the command returns reaches QUEUE, but a publish running at the same
moment may still leave its copy in it. The command asks for confirmation on
standard input; --yes skips the question (for scripts).

Where the driver can list subscriptions, a queue that is not a subscription
of TOPIC is not deleted: one that holds anything is refused (exit 1; check
the names with fila topic list TOPIC, or delete the queue with fila queue
delete), an empty one prints "nothing to do" (exit 0). Where it cannot
(RabbitMQ), a warning says the command cannot tell.`,
		Example: `  fila topic unsubscribe orders orders.audit
  fila topic unsubscribe orders orders.audit --yes`,
		Args: topicArgs("unsubscribe", true),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic, q := args[0], args[1]
			if err := checkTopic(topic); err != nil {
				return err
			}
			if err := fila.ValidateQueueName(q); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				hint, held := "", int64(-1)
				if s, err := c.QueueStats(ctx, q); err == nil {
					held = s.Ready + s.Delayed + s.Leased + s.Dead
					hint = fmt.Sprintf(" (%d messages, %d dead letters)", s.Ready+s.Delayed+s.Leased, s.Dead)
				}
				subs, err := c.TopicSubscriptions(ctx, topic)
				switch {
				case cannotListSubscriptions(err):
					a.warnf("the %s driver cannot list subscriptions: this command cannot tell whether queue %q is a subscription of topic %q", c.DriverName(), q, topic)
				case err != nil:
					return err
				case !subscribed(subs, q) && held == 0:
					// A second run, or a misspelt name: the queue holds
					// nothing, so there is nothing to delete either.
					_, err := fmt.Fprintf(a.stdout, "nothing to do: queue %q is not a subscription of topic %q and holds nothing\n", q, topic)
					return err
				case !subscribed(subs, q):
					return &exitErr{code: exitError, err: fmt.Errorf("queue %q is not a subscription of topic %q; nothing deleted (check the names with 'fila topic list %s'; to delete the queue anyway, use 'fila queue delete %s --force')", q, topic, topic, q)}
				}
				if !yes {
					ok, err := a.confirm(ctx, fmt.Sprintf("Unsubscribe queue %q from topic %q and delete the queue%s for good?", q, topic, hint))
					if err != nil {
						return err
					}
					if !ok {
						return &exitErr{code: exitError, err: fmt.Errorf("aborted; nothing changed (answer y to unsubscribe and delete the queue, or pass --yes)")}
					}
				}
				if err := c.TopicUnsubscribe(ctx, topic, q); err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "unsubscribed queue %q from topic %q and deleted the queue\n", q, topic)
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// subscribed reports whether queue is one of subs.
func subscribed(subs []fila.Subscription, queue string) bool {
	return slices.ContainsFunc(subs, func(s fila.Subscription) bool { return s.Queue == queue })
}

func newTopicListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list TOPIC",
		Short: "Print the queues subscribed to a topic, one per line, with their kind patterns",
		Long: `Print, one per line and sorted, the queues subscribed to TOPIC. A queue that
takes only some kinds is followed by its patterns, each after a tab; a queue
alone on its line takes every kind. A topic without subscriptions prints
nothing and gets a warning on standard error (a misspelt topic has none
either). RabbitMQ lists subscriptions only through its management API
(fila_management_url in its URL): without it the command exits 4.`,
		Example: `  fila topic list orders`,
		Args:    topicArgs("list", false),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if err := checkTopic(topic); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				subs, err := c.TopicSubscriptions(ctx, topic)
				if cannotListSubscriptions(err) {
					return fmt.Errorf("%w\nThe broker cannot tell which queues subscribe to a topic: keep the list with your deployment (the queues your fila topic subscribe commands named), or read it from the broker's own tools (on RabbitMQ, the bindings of the fanout exchange fila.TOPIC:topic, or PREFIX.TOPIC:topic with fila_prefix, and those of the topic exchange fila.TOPIC:route behind it, whose binding keys are the kind patterns: rabbitmqctl list_bindings).", err)
				}
				if err != nil {
					return err
				}
				if len(subs) == 0 {
					a.warnf("topic %q has no subscriptions (a misspelt topic has none either); add one with 'fila topic subscribe %s QUEUE'", topic, topic)
				}
				for _, s := range subs {
					line := s.Queue
					for _, p := range s.Patterns {
						line += "\t" + p
					}
					if _, err := fmt.Fprintln(a.stdout, line); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

func newTopicPublishCmd(a *app) *cobra.Command {
	var mf messageFlags
	cmd := &cobra.Command{
		Use:   "publish TOPIC",
		Short: "Publish one message to a topic: print its id and how many subscriptions got a copy",
		Long: `Publish one message to TOPIC: every queue subscribed to it gets a copy. The
message flags are fila enqueue's; the body is --body, or standard input when
--body is not given. The first line of output is the published id (alone,
for scripts); the copy in subscription queue Q has its own id,
fila.CopyID(ID, Q), which fila dead and fila message cancel name. The second
line says how many subscriptions got a copy ("at least one" where the broker
cannot count them: RabbitMQ).

A topic without subscriptions stores nothing: exit 0, with a warning on
standard error. A dedup key applies in each subscription on its own: one
whose pending message holds the key gets no copy. A publish that fails part
way may have stored the copies of some subscriptions (PostgreSQL stores them
all or none, unless the message has a dedup key); publishing again may give
those a second copy (at least once).`,
		Example: `  fila topic publish orders -k order.created --body '{"order_id":7}'
  echo '{"order_id":7}' | fila topic publish orders -k order.created --header tenant=acme --delay 10m`,
		Args: topicArgs("publish", false),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if err := checkTopic(topic); err != nil {
				return err
			}
			m, err := mf.message(cmd, a.stdin)
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *fila.Client) error {
				res, err := c.PublishBatch(ctx, topic, []fila.Message{m})
				if err != nil {
					if len(res.IDs) == 1 {
						return fmt.Errorf("%w\nSome subscriptions may have their copy of %s already; publishing again may give them a second one (at least once).", err, res.IDs[0])
					}
					return err
				}
				if res.Subscriptions == 0 {
					a.warnf("topic %q has no subscriptions: nothing was stored; add one with 'fila topic subscribe %s QUEUE' (it gets the messages published after)", topic, topic)
				}
				_, err = fmt.Fprintf(a.stdout, "%s\n%s\n", res.IDs[0], publishSummary(topic, res.Subscriptions))
				return err
			})
		},
	}
	mf.register(cmd, "a subscription whose pending message holds this key gets no copy")
	return cmd
}

// publishSummary tells how many subscriptions of topic got a copy; n < 0
// means the driver cannot count them but at least one did (RabbitMQ).
func publishSummary(topic string, n int) string {
	switch {
	case n < 0:
		return fmt.Sprintf("copied to at least one subscription of topic %q", topic)
	case n == 0:
		return fmt.Sprintf("copied to no subscription of topic %q: nothing stored", topic)
	case n == 1:
		return fmt.Sprintf("copied to 1 subscription of topic %q", topic)
	default:
		return fmt.Sprintf("copied to %d subscriptions of topic %q", n, topic)
	}
}
