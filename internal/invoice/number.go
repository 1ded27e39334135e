package invoice

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// firstNumberPrefix and firstNumberDigits make the number suggested when
// no invoice tells the organization's own way: INV-0001.
const (
	firstNumberPrefix = "INV-"
	firstNumberDigits = "0000"
)

// NextNumber suggests the number of the organization's next invoice (the
// portal's editor offers it): the prefix of its newest invoice's number
// (all but its trailing digits), then the highest trailing number of its
// invoices with that prefix plus one, zero-padded alike ("INV-0042" →
// "INV-0043", "INV-0999" → "INV-1000", "INV-9999" → "INV-10000"). Without
// invoices, or when the newest number ends in no digit, it is INV-0001 or
// the next of the INV- numbers.
func (s *Store) NextNumber(ctx context.Context, org uuid.UUID) (string, error) {
	var newest string
	err := s.DB.GetContext(ctx, &newest, `SELECT invoice_number FROM invoices WHERE organization_id = $1
		ORDER BY created_at DESC, id DESC LIMIT 1`, org)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("invoice: unable to read the newest invoice number: %w", err)
	}
	prefix := strings.TrimRight(newest, "0123456789")
	if prefix == newest {
		prefix = firstNumberPrefix
	}
	// The digits after the prefix, the highest first: by value (their
	// length without leading zeros, then the digits), then the widest.
	var digits string
	err = s.DB.GetContext(ctx, &digits, `
		SELECT d FROM (SELECT substr(invoice_number, $3) AS d FROM invoices
			WHERE organization_id = $1 AND starts_with(invoice_number, $2)) n
		WHERE d ~ '^[0-9]+$'
		ORDER BY length(ltrim(d, '0')) DESC, ltrim(d, '0') COLLATE "C" DESC, length(d) DESC LIMIT 1`,
		org, prefix, utf8.RuneCountInString(prefix)+1)
	if errors.Is(err, sql.ErrNoRows) {
		digits = firstNumberDigits
	} else if err != nil {
		return "", fmt.Errorf("invoice: unable to read invoice numbers: %w", err)
	}
	return prefix + increment(digits), nil
}

// increment is the decimal digits plus one, as wide or one digit wider.
func increment(digits string) string {
	b := []byte(digits)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}
