package filatest

import (
	"testing"
	"time"
)

// TestDockerCheckAnswers runs the Docker engine check and logs how long it
// took: without an engine it must answer at once, not after a timeout. It
// asserts only the bound of the check's own timeout, so it cannot flake.
func TestDockerCheckAnswers(t *testing.T) {
	start := time.Now()
	err := checkDocker()
	took := time.Since(start)
	t.Logf("Docker engine check: %v in %v", errOrOK(err), took)
	if took > dockerCheckTimeout+time.Second {
		t.Fatalf("Docker check took %v, longer than its %v timeout", took, dockerCheckTimeout)
	}
}

func errOrOK(err error) string {
	if err == nil {
		return "engine answers"
	}
	return "no engine (" + err.Error() + ")"
}
