package directory

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

func newStore(t *testing.T) *Store {
	t.Helper()
	db, err := postgres.Open(t.Context(), testDSN, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &Store{DB: db}
}

// must is v once t is failed if err is not nil: must(f())(t).
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ptr(s string) *string { return &s }

// mainStreet is a location as an operator gives it.
func mainStreet(name string) NewLocation {
	return NewLocation{Name: name, TimeZone: "America/Chicago", AddressLine1: "1 Main St", City: "Austin", State: "TX",
		PostalCode: "78701"}
}

// rows counts the rows of every table the package owns, in one string, so
// that a refused call can be seen to have written nothing.
func rows(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var counts []string
	for _, table := range []string{"organizations", "locations", "merchant_accounts", "portfolio_merchants"} {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM `+table); err != nil {
			t.Fatal(err)
		}
		counts = append(counts, fmt.Sprintf("%s=%d", table, n))
	}
	return strings.Join(counts, " ")
}

// Each bad onboarding argument is refused, in words naming its flag, of
// the kind a front answers it by, and nothing is written.
func TestOnboardingRefusesEachBadArgument(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	merchant := must(s.CreateOrganization(ctx, auth.KindMerchant, "Dana's Bakery", "", nil))(t)
	reseller := must(s.CreateOrganization(ctx, auth.KindReseller, "Northwind Payments", "", nil))(t)
	other := must(s.CreateOrganization(ctx, auth.KindMerchant, "Other Bakery", "", nil))(t)
	loc := must(s.CreateLocation(ctx, merchant.ID, mainStreet("Main Street")))(t)
	otherLoc := must(s.CreateLocation(ctx, other.ID, mainStreet("Elsewhere")))(t)
	must(s.CreateMID(ctx, merchant.ID, loc.ID, "496160873888"))(t)
	must(s.CreateMID(ctx, other.ID, otherLoc.ID, "496160873999"))(t)
	unknown := uuid.New()

	for _, c := range []struct {
		name  string
		call  func() error
		kind  rule.Kind
		field string
		says  string // in the message
	}{
		{"organization of an unknown kind", func() error { _, err := s.CreateOrganization(ctx, "bank", "Acme", "", nil); return err },
			rule.Invalid, "--kind", `got "bank"`},
		{"organization without a name", func() error { _, err := s.CreateOrganization(ctx, auth.KindMerchant, "  ", "", nil); return err },
			rule.Invalid, "--name", "1 to 200 characters"},
		{"organization name too long", func() error {
			_, err := s.CreateOrganization(ctx, auth.KindMerchant, strings.Repeat("a", 201), "", nil)
			return err
		}, rule.Invalid, "--name", "1 to 200 characters"},
		{"reseller of a reseller", func() error {
			_, err := s.CreateOrganization(ctx, auth.KindReseller, "Sub", "", &reseller.ID)
			return err
		}, rule.Invalid, "--reseller", "a reseller has no reseller"},
		{"unknown reseller", func() error { _, err := s.CreateOrganization(ctx, auth.KindMerchant, "Acme", "", &unknown); return err },
			rule.Unprocessable, "--reseller", "no such organization"},
		{"a merchant as reseller", func() error {
			_, err := s.CreateOrganization(ctx, auth.KindMerchant, "Acme", "", &other.ID)
			return err
		}, rule.Unprocessable, "--reseller", "is a merchant, not a reseller"},
		{"a merchant with a slug", func() error {
			_, err := s.CreateOrganization(ctx, auth.KindMerchant, "Acme", "acme-bakery", nil)
			return err
		}, rule.Invalid, "--slug", "for resellers"},
		{"a slug of other characters", func() error {
			_, err := s.CreateOrganization(ctx, auth.KindReseller, "Acme", "Acme_Payments", nil)
			return err
		}, rule.Invalid, "--slug", "3 to 40 of a-z, 0-9 and -"},
		{"a slug taken", func() error {
			_, err := s.CreateOrganization(ctx, auth.KindReseller, "Acme", *reseller.Slug, nil)
			return err
		}, rule.Conflict, "--slug", "another organization has this slug"},
		{"location without a city", func() error {
			n := mainStreet("Second Street")
			n.City = " "
			_, err := s.CreateLocation(ctx, merchant.ID, n)
			return err
		}, rule.Invalid, "--city", "1 to 200 characters"},
		{"location time zone unknown", func() error {
			n := mainStreet("Second Street")
			n.TimeZone = "Mars/Olympus_Mons"
			_, err := s.CreateLocation(ctx, merchant.ID, n)
			return err
		}, rule.Invalid, "--time-zone", "IANA time zone"},
		{"location time zone Local", func() error {
			n := mainStreet("Second Street")
			n.TimeZone = "Local"
			_, err := s.CreateLocation(ctx, merchant.ID, n)
			return err
		}, rule.Invalid, "--time-zone", `got "Local"`},
		{"location email", func() error {
			n := mainStreet("Second Street")
			n.Email = ptr("billing at example.com")
			_, err := s.CreateLocation(ctx, merchant.ID, n)
			return err
		}, rule.Invalid, "--email", "must be an email address"},
		{"location of a reseller", func() error { _, err := s.CreateLocation(ctx, reseller.ID, mainStreet("HQ")); return err },
			rule.Unprocessable, "--org", "only merchants have locations"},
		{"location of an unknown organization", func() error { _, err := s.CreateLocation(ctx, unknown, mainStreet("HQ")); return err },
			rule.Unprocessable, "--org", "no such organization"},
		{"MID of five digits", func() error { _, err := s.CreateMID(ctx, merchant.ID, loc.ID, "12345"); return err },
			rule.Invalid, "--mid", "6 to 16 digits"},
		{"MID of seventeen digits", func() error {
			_, err := s.CreateMID(ctx, merchant.ID, loc.ID, "12345678901234567")
			return err
		}, rule.Invalid, "--mid", "6 to 16 digits"},
		{"MID with letters", func() error { _, err := s.CreateMID(ctx, merchant.ID, loc.ID, "4961abcd"); return err },
			rule.Invalid, "--mid", "6 to 16 digits"},
		{"MID at another organization's location", func() error {
			_, err := s.CreateMID(ctx, merchant.ID, otherLoc.ID, "496160873777")
			return err
		}, rule.Unprocessable, "--location", "no such location in organization"},
		{"MID at an unknown location", func() error { _, err := s.CreateMID(ctx, merchant.ID, unknown, "496160873777"); return err },
			rule.Unprocessable, "--location", "no such location"},
		{"MID the organization holds", func() error {
			_, err := s.CreateMID(ctx, merchant.ID, loc.ID, "496160873888")
			return err
		}, rule.Conflict, "--mid", "has this MID already"},
		{"MID another organization holds", func() error {
			_, err := s.CreateMID(ctx, merchant.ID, loc.ID, "496160873999")
			return err
		}, rule.Unprocessable, "--mid", "another organization (" + other.ID.String() + ") holds this MID"},
		{"deactivating an unknown location", func() error { _, err := s.DeactivateLocation(ctx, unknown); return err },
			rule.NotFound, "", "no such location"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := rows(t, s.DB)
			err := c.call()
			e := rule.As(err)
			if e == nil || e.Kind != c.kind || e.Field != c.field || !strings.Contains(e.Message, c.says) {
				t.Fatalf("refusal %#v (%v); want %v of %q saying %q", e, err, c.kind, c.field, c.says)
			}
			if c.kind == rule.Invalid && !slices.Equal(e.Fields[c.field], []string{e.Message}) {
				t.Errorf("fields %v, want the message under %s", e.Fields, c.field)
			}
			if after := rows(t, s.DB); after != before {
				t.Errorf("rows %s after the refusal, want %s", after, before)
			}
		})
	}
}

// What onboarding makes: a merchant joins its reseller's portfolio, a
// user gets every permission offered to its kind unless told which, and
// reads stay within one organization.
func TestOnboarding(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	reseller := must(s.CreateOrganization(ctx, auth.KindReseller, "Northwind Payments", "", nil))(t)
	merchant := must(s.CreateOrganization(ctx, auth.KindMerchant, "  Dana's Bakery ", "", &reseller.ID))(t)
	if merchant.Name != "Dana's Bakery" || merchant.Status != "active" || merchant.ResellerID == nil {
		t.Errorf("merchant %+v", merchant)
	}
	var inPortfolio bool
	if err := s.DB.Get(&inPortfolio, `SELECT EXISTS (SELECT 1 FROM portfolio_merchants WHERE reseller_id = $1 AND merchant_id = $2)`,
		reseller.ID, merchant.ID); err != nil || !inPortfolio {
		t.Errorf("the merchant is not in its reseller's portfolio (%v)", err)
	}

	second := must(s.CreateLocation(ctx, merchant.ID, mainStreet("Second Street")))(t)
	first := mainStreet("First Street")
	first.ReceiptName, first.Phone = ptr("Dana's"), ptr("(512) 555-0100")
	firstLoc := must(s.CreateLocation(ctx, merchant.ID, first))(t)
	if firstLoc.Status != "active" || *firstLoc.ReceiptName != "Dana's" || firstLoc.AddressLine2 != nil {
		t.Errorf("location %+v", firstLoc)
	}
	locs := must(s.Locations(ctx, merchant.ID))(t)
	if len(locs) != 2 || locs[0].ID != firstLoc.ID || locs[1].ID != second.ID {
		t.Errorf("locations %+v, want First Street then Second Street", locs)
	}
	if got := must(s.Location(ctx, merchant.ID, second.ID))(t); got.Name != "Second Street" {
		t.Errorf("location read %+v", got)
	}
	if _, err := s.Location(ctx, reseller.ID, second.ID); err != ErrNotFound {
		t.Errorf("another organization's location: %v, want ErrNotFound", err)
	}

	a := must(s.CreateMID(ctx, merchant.ID, firstLoc.ID, "496160873002"))(t)
	b := must(s.CreateMID(ctx, merchant.ID, second.ID, "496160873001"))(t)
	all := must(s.MerchantAccounts(ctx, merchant.ID, nil))(t)
	if len(all) != 2 || all[0].ID != b.ID || all[1].ID != a.ID {
		t.Errorf("MIDs %+v, want ordered by mid", all)
	}
	if of := must(s.MerchantAccounts(ctx, merchant.ID, &firstLoc.ID))(t); len(of) != 1 || of[0].ID != a.ID {
		t.Errorf("MIDs of First Street %+v", of)
	}
	if of := must(s.MerchantAccounts(ctx, reseller.ID, nil))(t); len(of) != 0 {
		t.Errorf("the reseller sees MIDs %+v", of)
	}

	if err := s.SetOrganizationStatus(ctx, merchant.ID, "suspended"); err != nil {
		t.Fatal(err)
	}
	var status string
	if err := s.DB.Get(&status, `SELECT status FROM organizations WHERE id = $1`, merchant.ID); err != nil || status != "suspended" {
		t.Errorf("status %q (%v), want suspended", status, err)
	}
	if err := s.SetOrganizationStatus(ctx, uuid.New(), "suspended"); err != ErrNoOrganization {
		t.Errorf("an unknown organization: %v, want ErrNoOrganization", err)
	}
}

// A deactivated location is inactive (invoice refuses its MIDs) and keeps
// its MIDs; the organization's other locations stay active; deactivating
// it again changes nothing.
func TestDeactivateLocation(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	org := must(s.CreateOrganization(ctx, auth.KindMerchant, "Dana's Bakery", "", nil))(t)
	loc := must(s.CreateLocation(ctx, org.ID, mainStreet("Main Street")))(t)
	stays := must(s.CreateLocation(ctx, org.ID, mainStreet("Other Street")))(t)
	mid := must(s.CreateMID(ctx, org.ID, loc.ID, "496160874888"))(t)

	off := must(s.DeactivateLocation(ctx, loc.ID))(t)
	if off.Status != "inactive" || off.UpdatedAt.Before(loc.UpdatedAt) {
		t.Errorf("deactivated %+v", off)
	}
	if got := must(s.Location(ctx, org.ID, loc.ID))(t); got.Status != "inactive" {
		t.Errorf("read back as %s", got.Status)
	}
	if got := must(s.Location(ctx, org.ID, stays.ID))(t); got.Status != "active" {
		t.Errorf("the other location is %s", got.Status)
	}
	if mids := must(s.MerchantAccounts(ctx, org.ID, &loc.ID))(t); len(mids) != 1 || mids[0].ID != mid.ID {
		t.Errorf("MIDs after deactivation %+v, want the one it had", mids)
	}
	if again := must(s.DeactivateLocation(ctx, loc.ID))(t); again.Status != "inactive" {
		t.Errorf("deactivated again: %+v", again)
	}
	// A new MID may still be added to it: the location keeps its accounts.
	must(s.CreateMID(ctx, org.ID, loc.ID, "496160874889"))(t)
}

// Organizations adding the same MID at once: one holds it, the other is
// refused naming the holder, whichever comes first.
func TestMIDUniqueAcrossOrganizationsAtOnce(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	type result struct {
		org uuid.UUID
		err error
	}
	const n = 4
	orgs := make([]uuid.UUID, n)
	locs := make([]uuid.UUID, n)
	for i := range n {
		orgs[i] = must(s.CreateOrganization(ctx, auth.KindMerchant, "Bakery", "", nil))(t).ID
		locs[i] = must(s.CreateLocation(ctx, orgs[i], mainStreet("Main Street")))(t).ID
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateMID(ctx, orgs[i], locs[i], "496160870000")
			results <- result{orgs[i], err}
		}()
	}
	wg.Wait()
	close(results)
	var holder uuid.UUID
	var refused []error
	for r := range results {
		if r.err == nil {
			if holder != uuid.Nil {
				t.Fatalf("two organizations hold the MID: %s and %s", holder, r.org)
			}
			holder = r.org
			continue
		}
		refused = append(refused, r.err)
	}
	if holder == uuid.Nil || len(refused) != n-1 {
		t.Fatalf("holder %s, %d refused; want one holder", holder, len(refused))
	}
	for _, err := range refused {
		if e := rule.As(err); e == nil || e.Kind != rule.Unprocessable || !strings.Contains(e.Message, holder.String()) {
			t.Errorf("refusal %v, want one naming the holder %s", err, holder)
		}
	}
	var count int
	if err := s.DB.Get(&count, `SELECT count(*) FROM merchant_accounts WHERE mid = '496160870000'`); err != nil || count != 1 {
		t.Errorf("%d rows of the MID (%v), want 1", count, err)
	}
}
