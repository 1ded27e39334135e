// Package contract runs the end-to-end flows once through `prism proxy
// --errors` in front of the real server: any request or response that breaks
// openapi.yaml fails the test.
package contract

import (
	"os"
	"testing"

	"github.com/payreq/payreq/internal/pgtest"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }
