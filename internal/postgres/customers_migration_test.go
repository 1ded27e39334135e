package postgres_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

// Today's invoices, saved cards and stated preferences become one customer
// per organization and email in any case: the email as its latest invoice
// sent it, with that invoice's name, company and phone, made when its
// first invoice was; every invoice and saved card points to its
// organization's customer, and the preference moves onto it. Cards and
// preferences of an email no invoice names make customers too.
func TestMigrationMakesCustomers(t *testing.T) {
	db := open(t, pgtest.NewEmptyDatabase(t))
	migrateBefore(t, db, "00046")
	orgA, orgB, loc, locB, mid, midB := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	first := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	inv := map[string]uuid.UUID{"a-old": uuid.New(), "a-new": uuid.New(), "a-luis": uuid.New(), "b-dana": uuid.New()}
	card, orphanCard := uuid.New(), uuid.New()
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO organizations (id, name, kind) VALUES ($1, 'A Co', 'merchant'), ($2, 'B Co', 'merchant')`, []any{orgA, orgB}},
		{`INSERT INTO locations (id, organization_id, name, time_zone, status, address_line1, city, state, postal_code)
			VALUES ($1, $2, 'Shop', 'America/Chicago', 'active', '1 Main St', 'Springfield', 'IL', '62701'),
			       ($3, $4, 'Shop', 'America/Chicago', 'active', '1 Main St', 'Springfield', 'IL', '62701')`, []any{loc, orgA, locB, orgB}},
		{`INSERT INTO merchant_accounts (id, organization_id, location_id, mid) VALUES ($1, $2, $3, '496160873888'), ($4, $5, $6, '496160873889')`,
			[]any{mid, orgA, loc, midB, orgB, locB}},
		{`INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, amount, customer_name, customer_company,
				customer_email, customer_phone, delivery, status, created_at, created_by_name)
			VALUES ($1, $5, $6, 'A-1', 10, 'Dana Old', NULL, 'dana@example.com', NULL, 'email', 'open', $9, 'key'),
			       ($2, $5, $6, 'A-2', 20, 'Dana Whitfield', 'Whitfield Catering', 'Dana@Example.com', '+15125550148', 'email', 'open', $10, 'key'),
			       ($3, $5, $6, 'A-3', 30, 'Luis', NULL, 'luis@example.com', NULL, 'email', 'paid', $10, 'key'),
			       ($4, $7, $8, 'B-1', 40, 'Dana at B', NULL, 'dana@example.com', NULL, 'email', 'open', $10, 'key')`,
			[]any{inv["a-old"], inv["a-new"], inv["a-luis"], inv["b-dana"], orgA, mid, orgB, midB, first, first.Add(48 * time.Hour)}},
		{`INSERT INTO saved_cards (id, organization_id, merchant_account_id, customer_email, profile_id, account_id, card_brand, last_four,
				expiry, saved_at, saved_by_name)
			VALUES ($1, $3, $4, 'dana@example.com', 'P1', '1', 'Visa', '1111', '1229', now(), 'Dana'),
			       ($2, $3, $4, 'gone@example.com', 'P2', '1', 'Visa', '1111', '1229', now(), 'Gone')`, []any{card, orphanCard, orgA, mid}},
		{`INSERT INTO customer_preferences (organization_id, customer_email, prefers)
			VALUES ($1, 'dana@example.com', 'text'), ($1, 'said@example.com', 'email')`, []any{orgA}},
	} {
		if _, err := db.Exec(stmt.sql, stmt.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.Migrate(t.Context(), db.DB); err != nil {
		t.Fatal(err)
	}

	type row struct {
		ID        uuid.UUID `db:"id"`
		Org       uuid.UUID `db:"organization_id"`
		Email     string    `db:"email"`
		Name      *string   `db:"name"`
		Company   *string   `db:"company"`
		Phone     *string   `db:"phone"`
		Prefers   *string   `db:"prefers"`
		CreatedAt time.Time `db:"created_at"`
	}
	var customers []row
	if err := db.Select(&customers, `SELECT id, organization_id, email, name, company, phone, prefers, created_at FROM customers
		ORDER BY organization_id = $1 DESC, lower(email)`, orgA); err != nil {
		t.Fatal(err)
	}
	byEmail := map[string]row{}
	for _, c := range customers {
		key := c.Org.String() + " " + c.Email
		byEmail[key] = c
	}
	if len(customers) != 5 {
		t.Fatalf("%d customers, want 5 (A: Dana, Luis, gone@, said@; B: Dana): %+v", len(customers), customers)
	}
	text := func(s *string) string {
		if s == nil {
			return "<nil>"
		}
		return *s
	}
	dana, ok := byEmail[orgA.String()+" Dana@Example.com"]
	if !ok {
		t.Fatalf("no customer of A with the latest invoice's email as sent: %+v", customers)
	}
	if text(dana.Name) != "Dana Whitfield" || text(dana.Company) != "Whitfield Catering" || text(dana.Phone) != "+15125550148" ||
		text(dana.Prefers) != "text" || !dana.CreatedAt.Equal(first) {
		t.Errorf("A's Dana: %+v", dana)
	}
	danaB, ok := byEmail[orgB.String()+" dana@example.com"]
	if !ok || danaB.ID == dana.ID || text(danaB.Name) != "Dana at B" || danaB.Prefers != nil {
		t.Errorf("B's Dana: %+v (ok %v)", danaB, ok)
	}
	if said := byEmail[orgA.String()+" said@example.com"]; text(said.Prefers) != "email" {
		t.Errorf("the preference of an email no invoice names: %+v", said)
	}
	gone, ok := byEmail[orgA.String()+" gone@example.com"]
	if !ok {
		t.Error("no customer for the saved card of an email no invoice names")
	}

	invoiceCustomers := map[uuid.UUID]uuid.UUID{}
	rows, err := db.Query(`SELECT id, customer_id FROM invoices`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, c uuid.UUID
		if err := rows.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		invoiceCustomers[id] = c
	}
	rows.Close()
	for name, want := range map[string]uuid.UUID{"a-old": dana.ID, "a-new": dana.ID, "a-luis": byEmail[orgA.String()+" luis@example.com"].ID,
		"b-dana": danaB.ID} {
		if invoiceCustomers[inv[name]] != want {
			t.Errorf("invoice %s: customer %s, want %s", name, invoiceCustomers[inv[name]], want)
		}
	}
	var cardCustomers []uuid.UUID
	if err := db.Select(&cardCustomers, `SELECT customer_id FROM saved_cards ORDER BY id = $1 DESC`, card); err != nil {
		t.Fatal(err)
	}
	if len(cardCustomers) != 2 || cardCustomers[0] != dana.ID || cardCustomers[1] != gone.ID {
		t.Errorf("saved cards' customers %v, want [%s %s]", cardCustomers, dana.ID, gone.ID)
	}
	var left int
	if err := db.Get(&left, `SELECT count(*) FROM pg_tables WHERE tablename = 'customer_preferences'`); err != nil || left != 0 {
		t.Errorf("customer_preferences still there (%d, %v)", left, err)
	}
}
