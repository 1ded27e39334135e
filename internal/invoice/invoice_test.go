package invoice

import (
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/rule"
)

func d(s string) apd.Decimal { return mustParse(s) }

func ptr[T any](v T) *T { return &v }

func draft(amount string, lines ...Line) Draft {
	return Draft{InvoiceNumber: "INV-1", Amount: d(amount), CustomerEmail: ptr("dana@example.com"), Lines: lines}
}

func line(q, c string) Line { return Line{Description: "x", Quantity: d(q), UnitCost: d(c)} }

func TestLinesAddUpByRoundingEachLineHalfUp(t *testing.T) {
	cases := []struct {
		name   string
		amount string
		lines  []Line
		ok     bool
	}{
		{"float cannot hold 0.1 + 0.2", "0.30", []Line{line("1", "0.1"), line("1", "0.2")}, true},
		{"half a cent rounds up", "0.01", []Line{line("1", "0.005")}, true},
		{"just under half a cent rounds down", "0.01", []Line{line("1", "0.0049")}, false},
		{"each line rounds before the sum", "0.02", []Line{line("1", "0.005"), line("1", "0.005")}, true},
		{"the sum is not rounded as a whole", "0.01", []Line{line("1", "0.005"), line("1", "0.005")}, false},
		{"quantity times cost", "10.00", []Line{line("3", "3.3333")}, true},
		{"discount line", "90.00", []Line{line("1", "100"), line("1", "-10")}, true},
		{"negative half cent rounds away from zero", "0.99", []Line{line("1", "1"), line("1", "-0.005")}, true},
		{"negative half cent does not round toward zero", "1.00", []Line{line("1", "1"), line("1", "-0.005")}, false},
		{"largest amount", "999999999.99", []Line{line("1", "999999999.99")}, true},
		{"mismatch", "12.40", []Line{line("1", "12.30")}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(draft(c.amount, c.lines...))
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok {
				ve := rule.As(err)
				if ve == nil || len(ve.Fields["lines"]) == 0 {
					t.Fatalf("accepted, want errors.lines; got %v", err)
				}
			}
		})
	}
}

func TestMismatchSaysBothSums(t *testing.T) {
	err := Validate(draft("12.40", line("2", "6.15")))
	msg := strings.Join(rule.As(err).Fields["lines"], " ")
	if !strings.Contains(msg, "12.30") || !strings.Contains(msg, "12.40") {
		t.Fatalf("message %q does not name both sums", msg)
	}
}

func TestFieldRules(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*Draft)
	}{
		{"customerEmail", func(d *Draft) { d.CustomerEmail = nil }},
		{"customerEmail", func(d *Draft) { d.CustomerEmail = ptr("not an email") }},
		{"amount", func(d *Draft) { d.Amount = mustParse("0") }},
		{"amount", func(d *Draft) { d.Amount = mustParse("-1") }},
		{"amount", func(d *Draft) { d.Amount = mustParse("1.005") }},
		{"amount", func(d *Draft) { d.Amount = mustParse("1000000000.00") }},
		{"customerPhone", func(d *Draft) { d.Delivery = ptr(Text) }},
		{"lines[0].quantity", func(d *Draft) { d.Lines = []Line{line("0", "1")} }},
		{"lines[0].quantity", func(d *Draft) { d.Lines = []Line{line("1.00001", "1")} }},
		{"lines[1].unitCost", func(d *Draft) { d.Lines = []Line{line("1", "1"), line("1", "0.00001")} }},
		{"lines[0].description", func(d *Draft) {
			d.Lines = []Line{{Description: "", Quantity: mustParse("1"), UnitCost: mustParse("1")}}
		}},
		{"invoiceNumber", func(d *Draft) { d.InvoiceNumber = strings.Repeat("x", 65) }},
		{"memo", func(d *Draft) { d.Memo = ptr(strings.Repeat("é", 2001)) }},
	}
	for _, c := range cases {
		dr := draft("1.00")
		c.edit(&dr)
		err := Validate(dr)
		ve := rule.As(err)
		if ve == nil || len(ve.Fields[c.field]) == 0 {
			t.Errorf("%s: want an error on it, got %v", c.field, err)
		}
	}
	trailing := draft("12.300")
	if err := Validate(trailing); err != nil {
		t.Errorf("12.300 has two significant decimal places, refused: %v", err)
	}
}

func TestStateMachine(t *testing.T) {
	now := time.Now()
	inv := &Invoice{Status: Open, Amount: d("100.00"), AmountPaid: d("0.00")}
	if err := ApplyPayment(inv, d("100.01"), now); err == nil {
		t.Fatal("overpayment accepted")
	}
	if err := ApplyPayment(inv, d("40.00"), now); err != nil || inv.Status != PartPaid || inv.PaidAt != nil {
		t.Fatalf("partial payment: %v %s", err, inv.Status)
	}
	if b := inv.Balance(); b.Text('f') != "60.00" {
		t.Fatalf("balance %s", b.Text('f'))
	}
	if err := ApplyPayment(inv, d("60"), now); err != nil || inv.Status != Paid || inv.PaidAt == nil {
		t.Fatalf("final payment: %v %s", err, inv.Status)
	}
	if err := cancel(inv, "key", now); err == nil {
		t.Fatal("a paid invoice was cancelled")
	}
	open := &Invoice{Status: PartPaid, Amount: d("1.00"), AmountPaid: d("0.50")}
	if err := cancel(open, "key", now); err != nil || open.Status != Cancelled || *open.CancelledByName != "key" {
		t.Fatalf("cancel part_paid: %v", err)
	}
	if err := ApplyPayment(open, d("0.50"), now); err == nil {
		t.Fatal("a cancelled invoice took a payment")
	}
}

func TestPreferenceWinsOverDeliveryWhenItCanBeHonoured(t *testing.T) {
	phone := "+15035550100"
	inv := &Invoice{Delivery: Email, CustomerEmail: "a@example.com", CustomerPhone: &phone, CustomerPrefers: ptr(Text)}
	if ch, to := channel(inv); ch != Text || to != phone {
		t.Fatalf("got %s to %s", ch, to)
	}
	inv.CustomerPhone = nil
	if ch, _ := channel(inv); ch != Email {
		t.Fatalf("text without a phone went by %s", ch)
	}
}
