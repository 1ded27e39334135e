package paypage_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

var receiptPath = regexp.MustCompile(`^/pay/[A-Za-z0-9_-]+/receipt/([0-9a-f-]{36})$`)

// nothingRecorded checks that an invoice still has no payment.
func nothingRecorded(t *testing.T, m apitest.Merchant, id uuid.UUID, failedAttempts int32) {
	t.Helper()
	inv, raw := m.Read(t, id)
	if n := len(*inv.Payments); n != 0 {
		t.Errorf("%d payments recorded, want none: %s", n, raw)
	}
	if got := inv.AmountPaid.Text('f'); got != "0.00" {
		t.Errorf("amountPaid %s, want 0.00", got)
	}
	if inv.Status != "open" {
		t.Errorf("status %s, want open", inv.Status)
	}
	if got := int32(inv.FailedAttempts); got != failedAttempts {
		t.Errorf("failedAttempts %d, want %d", got, failedAttempts)
	}
}

// flip changes a token's first character.
func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}
