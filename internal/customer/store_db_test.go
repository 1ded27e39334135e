package customer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// shop is a merchant with one MID, and the stores of its customers,
// invoices and cards, on the real database.
type shop struct {
	db        *sqlx.DB
	customers *customer.Store
	invoices  *invoice.Store
	org, mid  uuid.UUID
}

func newShop(t *testing.T) *shop {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, testDSN, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	dir := &directory.Store{DB: db}
	org, err := dir.CreateOrganization(ctx, auth.KindMerchant, "Dana's Bakery", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := dir.CreateLocation(ctx, org.ID, directory.NewLocation{Name: "Main Street", TimeZone: "America/Chicago",
		AddressLine1: "1 Main St", City: "Austin", State: "TX", PostalCode: "78701"})
	if err != nil {
		t.Fatal(err)
	}
	mid, err := dir.CreateMID(ctx, org.ID, loc.ID, fmt.Sprintf("4961%08d", rand.IntN(1e8)))
	if err != nil {
		t.Fatal(err)
	}
	links, err := invoice.NewPayLinks(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	invoices := &invoice.Store{DB: db, Now: time.Now, PublicURL: "https://pay.example", PayLinks: links}
	payments := &payment.Store{DB: db, Processor: processor.NewSimulator(), Now: time.Now, Invoices: invoices}
	invoices.Cards = payments
	return &shop{db: db, invoices: invoices, org: org.ID, mid: mid.ID,
		customers: &customer.Store{DB: db, Now: time.Now, Invoices: invoices, Cards: payments}}
}

func (s *shop) actor() customer.Actor { return customer.Actor{OrganizationID: s.org} }

func (s *shop) create(t *testing.T, f customer.Fields) customer.Customer {
	t.Helper()
	c, _, err := s.customers.Create(context.Background(), s.actor(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// invoice makes an invoice of amount; customerID nil: by email alone.
func (s *shop) invoice(t *testing.T, number, amount string, email *string, customerID *uuid.UUID) invoice.Invoice {
	t.Helper()
	var a apd.Decimal
	if _, _, err := a.SetString(amount); err != nil {
		t.Fatal(err)
	}
	no := false
	inv, _, err := s.invoices.Create(context.Background(), invoice.Actor{OrganizationID: s.org, Name: "key"},
		invoice.Draft{MerchantAccountID: s.mid, InvoiceNumber: number, Amount: a, CustomerEmail: email, CustomerID: customerID, Send: &no}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func ptr[T any](v T) *T { return &v }

// An email is one customer's in any case: a second customer with it in
// other capitals is refused naming the first, as is a change to it; the
// email is kept as first sent.
func TestEmailIsUniqueInAnyCase(t *testing.T) {
	t.Parallel()
	s, ctx := newShop(t), context.Background()
	dana := s.create(t, customer.Fields{Email: "Dana@Example.com", Name: ptr("Dana")})
	_, _, err := s.customers.Create(ctx, s.actor(), customer.Fields{Email: "dana@EXAMPLE.com"}, nil)
	if e := rule.As(err); e == nil || e.Kind != rule.Taken || e.Existing != dana.ID.String() {
		t.Fatalf("a second customer with the email: %v, want Taken naming %s", err, dana.ID)
	}
	luis := s.create(t, customer.Fields{Email: "luis@example.com"})
	_, err = s.customers.Update(ctx, s.actor(), luis.ID, customer.Patch{Email: ptr("DANA@example.com")})
	if e := rule.As(err); e == nil || e.Kind != rule.Taken || e.Existing != dana.ID.String() {
		t.Fatalf("a change to the email: %v, want Taken naming %s", err, dana.ID)
	}
	got, err := s.customers.Get(ctx, s.org, dana.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Email != "Dana@Example.com" {
		t.Errorf("email %q, want it as sent", got.Email)
	}
	// Its own email in other capitals is no conflict.
	if c, err := s.customers.Update(ctx, s.actor(), dana.ID, customer.Patch{Email: ptr("dana@example.com")}); err != nil || c.Email != "dana@example.com" {
		t.Errorf("recapitalized: %v %q", err, c.Email)
	}
}

// Of many creations of one email at once, exactly one makes it; the
// others are refused naming it.
func TestConcurrentCreationsMakeOne(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		made    []uuid.UUID
		refused []string
	)
	for i := range 8 {
		wg.Go(func() {
			email := []string{"same@example.com", "SAME@Example.com"}[i%2]
			c, _, err := s.customers.Create(context.Background(), s.actor(), customer.Fields{Email: email}, nil)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				made = append(made, c.ID)
			} else if e := rule.As(err); e != nil && e.Kind == rule.Taken {
				refused = append(refused, e.Existing)
			} else {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(made) != 1 || len(refused) != 7 {
		t.Fatalf("%d made, %d refused", len(made), len(refused))
	}
	for _, id := range refused {
		if id != made[0].String() {
			t.Errorf("refused naming %s, not the one made %s", id, made[0])
		}
	}
}

// An invoice without a customer finds the customer of its email in any
// case, or makes one from its details; with one, it takes the details it
// leaves out from the customer. Totals count every invoice and the
// balances of those open and part paid.
func TestInvoicesFindAndFillTheirCustomer(t *testing.T) {
	t.Parallel()
	s, ctx := newShop(t), context.Background()
	dana := s.create(t, customer.Fields{Email: "dana@example.com", Name: ptr("Dana Whitfield"), Company: ptr("Whitfield Catering"),
		Phone: ptr("+15125550148"), TaxExempt: true})
	first := s.invoice(t, "INV-1", "30.00", ptr("DANA@example.com"), nil)
	if first.CustomerID != dana.ID {
		t.Errorf("by email in other capitals: customer %s, want %s", first.CustomerID, dana.ID)
	}
	second := s.invoice(t, "INV-2", "12.50", nil, &dana.ID)
	if second.CustomerEmail != "dana@example.com" || *second.CustomerName != "Dana Whitfield" || *second.CustomerPhone != "+15125550148" {
		t.Errorf("filled from the customer: %q %v %v", second.CustomerEmail, second.CustomerName, second.CustomerPhone)
	}
	if _, err := s.invoices.Cancel(ctx, invoice.Actor{OrganizationID: s.org, Name: "key"}, first.ID); err != nil {
		t.Fatal(err)
	}
	got, err := s.customers.Get(ctx, s.org, dana.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.InvoiceCount != 2 || got.OpenBalance.Text('f') != "12.50" || !got.TaxExempt {
		t.Errorf("invoiceCount %d, openBalance %s, taxExempt %v; want 2, 12.50 (the cancelled one left out), true",
			got.InvoiceCount, got.OpenBalance.Text('f'), got.TaxExempt)
	}
	// A new email makes a customer of the invoice's details.
	luisInv := func() invoice.Invoice {
		var a apd.Decimal
		a.SetString("5.00")
		no := false
		inv, _, err := s.invoices.Create(ctx, invoice.Actor{OrganizationID: s.org, Name: "key"}, invoice.Draft{MerchantAccountID: s.mid,
			InvoiceNumber: "INV-3", Amount: a, CustomerEmail: ptr("luis@example.com"), CustomerName: ptr("Luis Ortega"), Send: &no}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}()
	luis, err := s.customers.Get(ctx, s.org, luisInv.CustomerID)
	if err != nil {
		t.Fatal(err)
	}
	if luis.Email != "luis@example.com" || luis.Name == nil || *luis.Name != "Luis Ortega" || luis.InvoiceCount != 1 {
		t.Errorf("made from the invoice: %+v", luis)
	}
	// Another email than the customer's, and a customer of nobody here, are refused.
	var a apd.Decimal
	a.SetString("1.00")
	for _, d := range []invoice.Draft{
		{MerchantAccountID: s.mid, InvoiceNumber: "INV-4", Amount: a, CustomerEmail: ptr("luis@example.com"), CustomerID: &dana.ID},
		{MerchantAccountID: s.mid, InvoiceNumber: "INV-5", Amount: a, CustomerID: ptr(uuid.New())},
	} {
		_, _, err := s.invoices.Create(ctx, invoice.Actor{OrganizationID: s.org, Name: "key"}, d, nil)
		if e := rule.As(err); e == nil || e.Kind != rule.Unprocessable {
			t.Errorf("%s: %v, want a refusal", d.InvoiceNumber, err)
		}
	}
}

// A customer with invoices is not deleted; one without is, its saved
// cards removed at the processor first, and kept whole when the processor
// fails.
func TestDelete(t *testing.T) {
	t.Parallel()
	s, ctx := newShop(t), context.Background()
	dana := s.create(t, customer.Fields{Email: "dana@example.com"})
	s.invoice(t, "INV-1", "10.00", nil, &dana.ID)
	if err := s.customers.Delete(ctx, s.actor(), dana.ID); !rule.Is(err, rule.Unprocessable) {
		t.Fatalf("deleting a customer with invoices: %v", err)
	}
	card := func(c uuid.UUID, profile string) {
		t.Helper()
		if _, err := s.db.Exec(`INSERT INTO saved_cards (id, organization_id, customer_id, profile_id, account_id, expiry, saved_at, saved_by_name)
			VALUES ($1, $2, $3, $4, '1', '1229', now(), 'Luis')`, uuid.New(), s.org, c, profile); err != nil {
			t.Fatal(err)
		}
	}
	luis := s.create(t, customer.Fields{Email: "luis@example.com"})
	card(luis.ID, "P1")
	card(luis.ID, "P2")
	if got, _ := s.customers.Get(ctx, s.org, luis.ID); len(got.SavedCards) != 2 {
		t.Fatalf("%d saved cards", len(got.SavedCards))
	}
	if err := s.customers.Delete(ctx, s.actor(), luis.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.customers.Get(ctx, s.org, luis.ID); err != customer.ErrNotFound {
		t.Errorf("read after delete: %v", err)
	}
	var cards int
	s.db.Get(&cards, `SELECT count(*) FROM saved_cards WHERE organization_id = $1`, s.org)
	if cards != 0 {
		t.Errorf("%d saved cards left", cards)
	}

	kept := s.create(t, customer.Fields{Email: "kept@example.com"})
	card(kept.ID, "P-0119") // the simulator fails to remove it
	if err := s.customers.Delete(ctx, s.actor(), kept.ID); err == nil || rule.As(err) != nil {
		t.Fatalf("the processor failing: %v, want its failure", err)
	}
	if got, err := s.customers.Get(ctx, s.org, kept.ID); err != nil || len(got.SavedCards) != 1 {
		t.Errorf("the customer and its card not kept: %v, %d cards", err, len(got.SavedCards))
	}
}

// A patch changes what it sets and clears what it sets to null; the rest
// stays. Its result obeys every rule.
func TestPatch(t *testing.T) {
	t.Parallel()
	s, ctx := newShop(t), context.Background()
	c := s.create(t, customer.Fields{Email: "dana@example.com", Name: ptr("Dana"), Phone: ptr("+15125550148"),
		Address: &customer.Address{Line1: "1 Main St", City: "Austin"}})
	if c.Address.Country != "US" {
		t.Errorf("country %q, want US by default", c.Address.Country)
	}
	got, err := s.customers.Update(ctx, s.actor(), c.ID, customer.Patch{Phone: customer.Change[string]{Set: true},
		Company: customer.Change[string]{Set: true, Value: ptr("Whitfield Catering")}, TaxExempt: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Phone != nil || got.Company == nil || *got.Company != "Whitfield Catering" || got.Name == nil || *got.Name != "Dana" ||
		!got.TaxExempt || got.Address == nil {
		t.Errorf("after the patch: %+v", got)
	}
	_, err = s.customers.Update(ctx, s.actor(), c.ID, customer.Patch{Address: customer.Change[customer.Address]{Set: true,
		Value: &customer.Address{Line1: "1 Main St", City: "Toronto", Country: "ZZ"}}})
	if e := rule.As(err); e == nil || len(e.Fields["address.country"]) == 0 {
		t.Errorf("country ZZ: %v", err)
	}
	if _, err := s.customers.Update(ctx, s.actor(), uuid.New(), customer.Patch{}); err != customer.ErrNotFound {
		t.Errorf("an unknown customer: %v", err)
	}
}

// q finds a substring of name, company or email in any case, an email
// filter the exact email in any case; LIKE's characters match themselves.
func TestListFilters(t *testing.T) {
	t.Parallel()
	s, ctx := newShop(t), context.Background()
	s.create(t, customer.Fields{Email: "dana@whitfield.example", Name: ptr("Dana Whitfield")})
	s.create(t, customer.Fields{Email: "ap@brightside.example", Company: ptr("Brightside Plumbing 100%")})
	s.create(t, customer.Fields{Email: "luis@example.com", Name: ptr("Luis Ortega")})
	for _, tc := range []struct {
		q, email string
		want     int
	}{
		{"WHIT", "", 1}, {"plumb", "", 1}, {"example", "", 3}, {"0%", "", 1}, {"_a", "", 0}, {"", "LUIS@example.com", 1},
		{"", "luis@example", 0},
	} {
		f := customer.Filter{}
		if tc.q != "" {
			f.Q = &tc.q
		}
		if tc.email != "" {
			f.Email = &tc.email
		}
		list, _, err := s.customers.List(ctx, s.org, f, 25, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != tc.want {
			t.Errorf("q %q email %q: %d customers, want %d", tc.q, tc.email, len(list), tc.want)
		}
	}
	one := "a"
	if _, _, err := s.customers.List(ctx, s.org, customer.Filter{Q: &one}, 25, ""); !rule.Is(err, rule.Invalid) {
		t.Errorf("q of one character: %v", err)
	}
}

// A customer deleted while an invoice for it is being made: either the
// invoice is made and the delete refused, or the customer is gone and the
// invoice refused; never an invoice without its customer.
func TestDeleteRacingAnInvoice(t *testing.T) {
	t.Parallel()
	s, ctx := newShop(t), context.Background()
	var a apd.Decimal
	a.SetString("1.00")
	for round := range 20 {
		c := s.create(t, customer.Fields{Email: fmt.Sprintf("race%d@example.com", round)})
		var (
			wg                sync.WaitGroup
			deleteErr, invErr error
		)
		wg.Go(func() { deleteErr = s.customers.Delete(ctx, s.actor(), c.ID) })
		wg.Go(func() {
			_, _, invErr = s.invoices.Create(ctx, invoice.Actor{OrganizationID: s.org, Name: "key"},
				invoice.Draft{MerchantAccountID: s.mid, InvoiceNumber: fmt.Sprintf("RACE-%d", round), Amount: a, CustomerID: &c.ID}, nil)
		})
		wg.Wait()
		switch {
		case deleteErr == nil && rule.Is(invErr, rule.Unprocessable):
		case invErr == nil && rule.Is(deleteErr, rule.Unprocessable):
		default:
			t.Fatalf("round %d: delete %v, invoice %v; want one of them refused", round, deleteErr, invErr)
		}
	}
	var orphans int
	if err := s.db.Get(&orphans, `SELECT count(*) FROM invoices i WHERE i.organization_id = $1
		AND NOT EXISTS (SELECT FROM customers c WHERE c.id = i.customer_id)`, s.org); err != nil || orphans != 0 {
		t.Errorf("%d invoices without their customer (%v)", orphans, err)
	}
}
