package invoice

import (
	"context"
	"slices"
	"testing"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/rule"
)

// An organization keeps named tax rates for its lines editor: listed by
// name, each name once in any case, each rate as a line takes it; another
// organization neither sees nor removes them; each change is audited.
func TestNamedTaxRates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newShop(t)
	owner := s.actor
	owner.Audit = &audit.Actor{Name: "Dana Whitfield <dana@example.com>", Address: "203.0.113.7"}

	rates, err := s.store.TaxRates(ctx, owner.OrganizationID)
	if err != nil || len(rates) != 0 {
		t.Fatalf("rates of a new organization: %v %v", rates, err)
	}
	sales, err := s.store.AddTaxRate(ctx, owner, "Sales tax", d("8.2500"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.AddTaxRate(ctx, owner, "City tax", d("2")); err != nil {
		t.Fatal(err)
	}
	if rates, err = s.store.TaxRates(ctx, owner.OrganizationID); err != nil || len(rates) != 2 {
		t.Fatalf("rates: %v %v", rates, err)
	}
	if rates[0].Label() != "City tax 2%" || rates[1].Label() != "Sales tax 8.25%" || rates[1].ID != sales.ID {
		t.Errorf("rates %q and %q, want City tax 2%% then Sales tax 8.25%%", rates[0].Label(), rates[1].Label())
	}

	for _, c := range []struct {
		name, rate, field string
		kind              rule.Kind
	}{
		{"SALES TAX", "5", "name", rule.Conflict},
		{"  ", "5", "name", rule.Invalid},
		{string(make([]rune, 101)), "5", "name", rule.Invalid},
		{"State tax", "100.00001", "rate", rule.Invalid},
		{"State tax", "6.12345", "rate", rule.Invalid},
		{"State tax", "-1", "rate", rule.Invalid},
	} {
		_, err := s.store.AddTaxRate(ctx, owner, c.name, d(c.rate))
		wantKind(t, err, c.kind)
		if e := rule.As(err); e.Field != c.field && len(e.Fields[c.field]) == 0 {
			t.Errorf("%q at %s: refusal %v not keyed %s", c.name, c.rate, err, c.field)
		}
	}

	other := newShop(t)
	if theirs, _ := other.store.TaxRates(ctx, other.actor.OrganizationID); len(theirs) != 0 {
		t.Errorf("another organization sees %d rates", len(theirs))
	}
	wantKind(t, other.store.RemoveTaxRate(ctx, other.actor, sales.ID), rule.NotFound)
	if err := s.store.RemoveTaxRate(ctx, owner, sales.ID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, s.store.RemoveTaxRate(ctx, owner, sales.ID), rule.NotFound)
	if rates, _ = s.store.TaxRates(ctx, owner.OrganizationID); len(rates) != 1 || rates[0].Name != "City tax" {
		t.Errorf("after the removal: %v", rates)
	}

	log, _, err := audit.Page(ctx, s.store.DB, owner.OrganizationID, s.now, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, l := range log {
		actions = append(actions, l.Action+": "+l.Detail)
	}
	want := []string{"tax rate removed: Sales tax 8.25%", "tax rate added: City tax 2%", "tax rate added: Sales tax 8.25%"}
	if !slices.Equal(actions, want) {
		t.Errorf("audit log %q, want %q", actions, want)
	}
}

// An invoice keeps its lines' rates and its tax: read alone or in a list,
// it answers the subtotal and tax its lines made.
func TestInvoiceKeepsItsTax(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newShop(t)
	dr := s.draft("TAX-1", "758.75")
	dr.Lines = []Line{taxed("40", "18.75", "8.2500"), taxed("1", "-50", "8.25"), taxed("1", "1.00", "")}
	if _, _, err := s.store.Create(ctx, s.actor, dr, nil); err != nil {
		t.Fatal(err)
	}
	list, _, err := s.store.List(ctx, s.actor.OrganizationID, Filter{}, 10, "")
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	inv, err := s.store.Get(ctx, s.actor.OrganizationID, list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []Invoice{list[0], inv} {
		wantMoney(t, "taxAmount", got.TaxAmount, "57.75")
		wantMoney(t, "subtotal", got.Subtotal(), "701.00")
	}
	if r := inv.Lines[0].TaxRate; r == nil || Percent(*r) != "8.25%" || inv.Lines[2].TaxRate != nil {
		t.Errorf("rates read back: %v, %v", inv.Lines[0].TaxRate, inv.Lines[2].TaxRate)
	}
	wantMoney(t, "line tax", LineTax(inv.Lines[1]), "-4.13")
}

// The messages' view of a taxed invoice: each line's rate, then subtotal
// and tax beside the total; without tax, neither.
func TestBillShowsTax(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	rate := d("8.25")
	taxed := s.draft("TAX-BILL", "40.00")
	taxed.Amount = d("43.30")
	taxed.Lines = []Line{{Description: "Beans", Quantity: d("2"), UnitCost: d("20.00"), TaxRate: &rate}}
	inv, _, err := s.store.Create(ctx, s.actor, taxed, nil)
	if err != nil {
		t.Fatal(err)
	}
	bill, err := s.store.Bill(ctx, s.actor.OrganizationID, inv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if bill.Amount != "$43.30" || bill.Subtotal != "$40.00" || bill.Tax != "$3.30" || bill.Lines[0].TaxRate != "8.25%" {
		t.Errorf("taxed bill: amount %q subtotal %q tax %q line rate %q", bill.Amount, bill.Subtotal, bill.Tax, bill.Lines[0].TaxRate)
	}
	plain, _, err := s.store.Create(ctx, s.actor, s.draft("PLAIN-BILL", "40.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if bill, err = s.store.Bill(ctx, s.actor.OrganizationID, plain.ID); err != nil || bill.Subtotal != "" || bill.Tax != "" || bill.Lines[0].TaxRate != "" {
		t.Errorf("untaxed bill: subtotal %q tax %q line rate %q (%v)", bill.Subtotal, bill.Tax, bill.Lines[0].TaxRate, err)
	}
}

// A named rate is renamed and its rate changed by its organization only,
// refused as an added one is (a name another rate has, a rate outside 0 to
// 100 or of more than 4 places), and audited naming it before and after.
func TestChangeTaxRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newShop(t)
	owner := s.actor
	owner.Audit = &audit.Actor{Name: "Dana Whitfield <dana@example.com>", Address: "203.0.113.7"}
	sales, err := s.store.AddTaxRate(ctx, owner, "Sales tax", d("8.25"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.AddTaxRate(ctx, owner, "City tax", d("2")); err != nil {
		t.Fatal(err)
	}
	changed, err := s.store.ChangeTaxRate(ctx, owner, sales.ID, "State tax", d("6.2500"))
	if err != nil || changed.Label() != "State tax 6.25%" {
		t.Fatalf("changed: %v %v", changed, err)
	}
	if got, err := s.store.TaxRate(ctx, owner.OrganizationID, sales.ID); err != nil || got.Label() != "State tax 6.25%" {
		t.Errorf("read back: %v %v", got, err)
	}
	for _, c := range []struct {
		name, rate, field string
		kind              rule.Kind
	}{
		{"city TAX", "5", "name", rule.Conflict},
		{"", "5", "name", rule.Invalid},
		{"State tax", "100.5", "rate", rule.Invalid},
		{"State tax", "1.00001", "rate", rule.Invalid},
	} {
		_, err := s.store.ChangeTaxRate(ctx, owner, sales.ID, c.name, d(c.rate))
		wantKind(t, err, c.kind)
		if e := rule.As(err); e.Field != c.field && len(e.Fields[c.field]) == 0 {
			t.Errorf("%q at %s: refusal %v not keyed %s", c.name, c.rate, err, c.field)
		}
	}
	other := newShop(t)
	_, err = other.store.ChangeTaxRate(ctx, other.actor, sales.ID, "Theirs", d("1"))
	wantKind(t, err, rule.NotFound)
	_, err = other.store.TaxRate(ctx, other.actor.OrganizationID, sales.ID)
	wantKind(t, err, rule.NotFound)
	if got, _ := s.store.TaxRate(ctx, owner.OrganizationID, sales.ID); got.Label() != "State tax 6.25%" {
		t.Errorf("after the refusals: %s", got.Label())
	}
	log, _, err := audit.Page(ctx, s.store.DB, owner.OrganizationID, s.now, nil, 1)
	if err != nil || len(log) != 1 || log[0].Action+": "+log[0].Detail != "tax rate changed: Sales tax 8.25% → State tax 6.25%" {
		t.Errorf("audit: %v %v", log, err)
	}
}
