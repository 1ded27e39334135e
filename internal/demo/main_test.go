package demo_test

import (
	"os"
	"testing"

	"github.com/payreq/payreq/internal/pgtest"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }
