package evidence_test

import (
	"testing"

	"github.com/contextd/contextd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
