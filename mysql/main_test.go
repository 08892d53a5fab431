package mysql_test

import (
	"testing"

	"github.com/fila-go/fila/internal/testenv"
)

// TestMain reports, after the tests, which servers they were skipped for.
func TestMain(m *testing.M) { testenv.Main(m) }
