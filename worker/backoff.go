package worker

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff returns how long to wait before the next attempt of a job whose
// attempt (1 for the first delivery) just failed.
type Backoff func(attempt int) time.Duration

// ExponentialBackoff is capped exponential backoff with jitter: after
// attempt n fails the delay is min(Base × Factor^(n-1), Max), then shortened
// by a random fraction of up to Jitter of itself, so retries of many jobs
// that failed together spread out instead of arriving at once. Delays never
// exceed Max.
//
// Zero fields take the defaults of [DefaultBackoff] except Jitter, where zero
// means none.
type ExponentialBackoff struct {
	// Base is the delay after the first failure; default 30s.
	Base time.Duration
	// Factor multiplies the delay after each further failure; default 4.
	// Values below 1 are taken as 1 (constant delay).
	Factor float64
	// Max caps the delay; default 10m.
	Max time.Duration
	// Jitter is the largest fraction (0 to 1) taken off each delay at random.
	Jitter float64
	// Rand returns a number in [0, 1) for the jitter; default math/rand/v2.
	// Tests inject a fixed source.
	Rand func() float64
}

// DefaultBackoff is the worker's default retry schedule, in the spirit of
// "30 s, 2 min, 10 min": 30s, 2m, 8m, then 10m for every later attempt, each
// shortened by up to 20% at random (so 24–30s, 96–120s, 6.4–8m, 8–10m).
var DefaultBackoff Backoff = ExponentialBackoff{Base: 30 * time.Second, Factor: 4, Max: 10 * time.Minute, Jitter: 0.2}.Delay

// Delay returns the delay after the given failed attempt.
func (b ExponentialBackoff) Delay(attempt int) time.Duration {
	if b.Base <= 0 {
		b.Base = 30 * time.Second
	}
	if b.Factor == 0 {
		b.Factor = 4
	} else if b.Factor < 1 || math.IsNaN(b.Factor) {
		b.Factor = 1
	}
	if b.Max <= 0 {
		b.Max = 10 * time.Minute
	}
	if attempt < 1 {
		attempt = 1
	}
	d := float64(b.Base) * math.Pow(b.Factor, float64(attempt-1))
	if math.IsInf(d, 0) || math.IsNaN(d) || d > float64(b.Max) {
		d = float64(b.Max)
	}
	if j := min(max(b.Jitter, 0), 1); j > 0 {
		r := rand.Float64
		if b.Rand != nil {
			r = b.Rand
		}
		d -= d * j * min(max(r(), 0), 1)
	}
	return time.Duration(d)
}

// ConstantBackoff returns a Backoff that always waits d.
func ConstantBackoff(d time.Duration) Backoff {
	return func(int) time.Duration { return d }
}
