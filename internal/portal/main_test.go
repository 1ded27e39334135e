package portal_test

import (
	"os"
	"testing"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// newEnv is a server on the package's database with a demo seeded.
func newEnv(t *testing.T) (*apitest.Env, apitestSeed) { // a demo merchant and reseller
	t.Helper()
	env := apitest.New(t, testDSN, apitest.Options{})
	return env, apitestSeed(env.Seed())
}

// newOwnEnv is newEnv on a database of the test's own (pgtest.NewDatabase),
// for tests that advance the clock, which then run in parallel with the others.
func newOwnEnv(t *testing.T) (*apitest.Env, apitestSeed) {
	t.Helper()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	return env, apitestSeed(env.Seed())
}
