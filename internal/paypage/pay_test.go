package paypage_test

import (
	"compress/gzip"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/processor"
)

func TestPayPartThenFull(t *testing.T) {
	t.Parallel()
	// Whole seconds, so times read back from the database compare equal.
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	m := apitest.NewMerchant(t, env)
	b := m.Body("PAY-1", "100.00", apitest.Line("2", "30.00"), apitest.Line("1", "40.00"))
	b["customerEmail"], b["customerPhone"] = "Dana.W@Example.com", "+15035550123"
	inv := m.MustCreate(t, b)
	path := apitest.PayPath(t, inv)

	shown := env.Visit(t, "GET", path, nil, nil)
	apitest.WantStatus(t, shown, http.StatusOK)
	for _, want := range []string{*inv.LocationName, "PAY-1", "$100.00", "$30.00", "$60.00", "$40.00", "Balance due", "<form", `name="cardNumber"`,
		`value="100.00"`, `<meta name="viewport"`} {
		if !strings.Contains(shown.Body, want) {
			t.Errorf("pay page lacks %q", want)
		}
	}
	if ct := shown.Header.Get("Content-Type"); ct != "text/html; charset=UTF-8" {
		t.Errorf("Content-Type %q", ct)
	}

	// A partial payment, saving the card and asking for texts.
	first := env.Pay(t, path, apitest.Payment{Card: "4111 1111 1111 1111", Amount: "40", Name: "Dana Whitfield", Prefers: "text", Save: true})
	apitest.WantStatus(t, first, http.StatusSeeOther)
	loc := first.Header.Get("Location")
	match := receiptPath.FindStringSubmatch(loc)
	if match == nil || !strings.HasPrefix(loc, path+"/receipt/") {
		t.Fatalf("Location %q", loc)
	}
	paidAt := env.Clock.Now()

	got, raw := m.Read(t, inv.Id)
	apitest.Want(t, "amountPaid", got.AmountPaid.Text('f'), "40.00")
	apitest.Want(t, "balance", got.Balance.Text('f'), "60.00")
	apitest.Want(t, "status", got.Status, "part_paid")
	apitest.Want(t, "paidAt set", got.PaidAt != nil, false)
	apitest.Want(t, "failedAttempts", got.FailedAttempts, 0)
	apitest.Want(t, "level3Sent", got.Level3Sent, false)
	if len(*got.Payments) != 1 {
		t.Fatalf("payments: %s", raw)
	}
	p := (*got.Payments)[0]
	apitest.Want(t, "payments[0].amount", p.Amount.Text('f'), "40.00")
	apitest.WantText(t, "payments[0].lastFour", p.LastFour, "1111")
	apitest.WantText(t, "payments[0].payerName", p.PayerName, "Dana Whitfield")
	apitest.Want(t, "payments[0].retRef set", apitest.Text(p.RetRef) != "" && p.RetRef != nil, true)
	apitest.Want(t, "payments[0].level3Sent", p.Level3Sent, false)
	apitest.Want(t, "payments[0].savedCard", p.SavedCard, true)
	apitest.Want(t, "payments[0].paidAt", p.PaidAt.Equal(paidAt), true)
	for _, want := range []string{`"amountPaid":"40.00"`, `"balance":"60.00"`, `"amount":"40.00"`} {
		apitest.Want(t, "the answer holds "+want, strings.Contains(raw, want), true)
	}
	if len(*got.SavedCards) != 1 {
		t.Fatalf("saved cards: %s", raw)
	}
	card := (*got.SavedCards)[0]
	apitest.WantText(t, "savedCards[0].lastFour", card.LastFour, "1111")
	apitest.WantText(t, "savedCards[0].cardBrand", card.CardBrand, "Visa")
	apitest.WantText(t, "savedCards[0].expiry", card.Expiry, env.FutureExpiry())
	apitest.Want(t, "savedCards[0].savedByName", card.SavedByName, "Dana Whitfield")
	apitest.Want(t, "savedCards[0].savedAt", card.SavedAt.Equal(paidAt), true)
	apitest.WantText(t, "customerPrefers", (*string)(got.CustomerPrefers), "text")
	var stored struct {
		Customer  uuid.UUID `db:"customer_id"`
		ProfileID string    `db:"profile_id"`
	}
	if err := env.App.DB.Get(&stored, `SELECT customer_id, profile_id FROM saved_cards WHERE id = $1`, card.Id); err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "saved card's customer", stored.Customer, got.CustomerId)
	apitest.Want(t, "saved card's profile_id set", stored.ProfileID != "", true)

	receipt := env.Visit(t, "GET", loc, nil, nil)
	apitest.WantStatus(t, receipt, http.StatusOK)
	for _, want := range []string{"$40.00", "Visa ending in 1111", *p.RetRef, "$60.00", "PAY-1", "Dana Whitfield"} {
		if !strings.Contains(receipt.Body, want) {
			t.Errorf("receipt lacks %q: %s", want, receipt.Body)
		}
	}

	// The rest, with the amount left empty: it defaults to the balance.
	env.Clock.Advance(time.Minute)
	second := env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "", Name: "Sam Whitfield"})
	apitest.WantStatus(t, second, http.StatusSeeOther)
	got, raw = m.Read(t, inv.Id)
	apitest.Want(t, "amountPaid", got.AmountPaid.Text('f'), "100.00")
	apitest.Want(t, "balance", got.Balance.Text('f'), "0.00")
	apitest.Want(t, "status", got.Status, "paid")
	apitest.Want(t, "paidAt", got.PaidAt != nil && got.PaidAt.Equal(env.Clock.Now()), true)
	if len(*got.Payments) != 2 {
		t.Fatalf("%d payments, want 2: %s", len(*got.Payments), raw)
	}
	p2 := (*got.Payments)[1]
	apitest.Want(t, "payments[1].amount", p2.Amount.Text('f'), "60.00")
	apitest.WantText(t, "payments[1].payerName", p2.PayerName, "Sam Whitfield")
	apitest.Want(t, "payments[1].savedCard", p2.SavedCard, false)
	apitest.Want(t, "payments[1].retRef differs from the first", apitest.Text(p2.RetRef) != apitest.Text(p.RetRef), true)
	apitest.Want(t, "saved cards", len(*got.SavedCards), 1)
	// The first receipt still says what the balance was right after it.
	if r := env.Visit(t, "GET", loc, nil, nil); !strings.Contains(r.Body, "$60.00") {
		t.Errorf("first receipt changed: %s", r.Body)
	}
	if r := env.Visit(t, "GET", second.Header.Get("Location"), nil, nil); !strings.Contains(r.Body, "$0.00") {
		t.Errorf("second receipt lacks the new balance: %s", r.Body)
	}

	// Paid: the page shows it and no form; a late POST charges nothing.
	paid := env.Visit(t, "GET", path, nil, nil)
	apitest.WantStatus(t, paid, http.StatusOK)
	if strings.Contains(paid.Body, "<form") || !strings.Contains(paid.Body, "paid in full") {
		t.Fatalf("paid page: %s", paid.Body)
	}
	late := env.Post(t, path, apitest.FormToken(t, shown), apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"})
	apitest.WantStatus(t, late, http.StatusUnprocessableEntity)
	if strings.Contains(late.Body, "<form") {
		t.Errorf("late POST shows a form")
	}
	if got, raw = m.Read(t, inv.Id); len(*got.Payments) != 2 {
		t.Fatalf("late POST recorded something: %s", raw)
	}
}

func TestPayDeclined(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("DEC-1", "25.00"))
	path := apitest.PayPath(t, inv)

	for i := 1; i <= 2; i++ {
		r := env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "25.00", Save: true, Prefers: "text"})
		apitest.WantStatus(t, r, http.StatusPaymentRequired)
		apitest.Want(t, "the decline page gives the reason", strings.Contains(r.Body, "Card declined by the issuer"), true)
		apitest.Want(t, "the decline page has the form", strings.Contains(r.Body, "<form"), true)
		if strings.Contains(r.Body, apitest.CardDecline) || strings.Contains(r.Body, apitest.TestCVV) {
			t.Fatalf("decline page echoes the card number or security code")
		}
		if !strings.Contains(r.Body, `value="Dana Whitfield"`) {
			t.Errorf("decline page lost the cardholder name")
		}
		nothingRecorded(t, m, inv.Id, int32(i))
	}
	got, raw := m.Read(t, inv.Id)
	if len(*got.SavedCards) != 0 || got.CustomerPrefers != nil {
		t.Fatalf("a decline saved a card or a preference: %s", raw)
	}
}

func TestPayProcessorUnavailable(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("ERR-1", "25.00"))
	r := env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardError, Amount: "25.00"})
	// The processor answered with an error: a bad gateway, not an outage.
	apitest.WantStatus(t, r, http.StatusBadGateway)
	apitest.Want(t, "the page says to try again", strings.Contains(r.Body, "try again"), true)
	apitest.Want(t, "the page has the form", strings.Contains(r.Body, "<form"), true)
	apitest.Want(t, "Retry-After set", r.Header.Get("Retry-After") != "", true)
	if strings.Contains(r.Body, apitest.CardError) {
		t.Fatalf("page echoes the card number")
	}
	nothingRecorded(t, m, inv.Id, 0)
}

func TestPayValidation(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	cases := []struct {
		name, field, message string
		p                    apitest.Payment
	}{
		{"more than the balance", "amount", "at most the balance of $100.00", apitest.Payment{Card: apitest.CardApprove, Amount: "100.01"}},
		{"three decimals", "amount", "at most two decimal places", apitest.Payment{Card: apitest.CardApprove, Amount: "12.345"}},
		{"zero", "amount", "more than $0.00", apitest.Payment{Card: apitest.CardApprove, Amount: "0"}},
		{"negative", "amount", "more than $0.00", apitest.Payment{Card: apitest.CardApprove, Amount: "-5"}}, // read as a number, as every form does
		{"not a number", "amount", "dollars and cents", apitest.Payment{Card: apitest.CardApprove, Amount: "ten"}},
		{"exponent", "amount", "dollars and cents", apitest.Payment{Card: apitest.CardApprove, Amount: "1e1"}},
		{"Luhn", "cardNumber", "not valid", apitest.Payment{Card: "4111111111111112", Amount: "1"}},
		{"card too short", "cardNumber", "12 to 19 digits", apitest.Payment{Card: "4111", Amount: "1"}},
		{"card missing", "cardNumber", "Enter the card number", apitest.Payment{Card: "", Amount: "1"}},
		{"expired", "expiry", "expired", apitest.Payment{Card: apitest.CardApprove, Amount: "1", Expiry: "0120"}},
		{"month 13", "expiry", "01 to 12", apitest.Payment{Card: apitest.CardApprove, Amount: "1", Expiry: "1399"}},
		{"expiry shape", "expiry", "MMYY", apitest.Payment{Card: apitest.CardApprove, Amount: "1", Expiry: "1"}},
		{"cvv two digits", "cvv", "3 or 4 digits", apitest.Payment{Card: apitest.CardApprove, Amount: "1", CVV: "12"}},
		{"cvv letters", "cvv", "3 or 4 digits", apitest.Payment{Card: apitest.CardApprove, Amount: "1", CVV: "12a"}},
		{"name blank", "cardholderName", "name on the card", apitest.Payment{Card: apitest.CardApprove, Amount: "1", Name: "   "}},
		{"prefers unknown", "prefers", "Choose email", apitest.Payment{Card: apitest.CardApprove, Amount: "1", Prefers: "pigeon"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A link per case: every POST counts toward the link's attempt limit.
			inv := m.MustCreate(t, m.Body(fmt.Sprintf("VAL-%d", i), "100.00"))
			r := env.Pay(t, apitest.PayPath(t, inv), c.p)
			apitest.WantStatus(t, r, http.StatusBadRequest)
			for _, want := range []string{
				`id="` + c.field + `-error"`, c.message, `href="#` + c.field + `"`,
			} {
				if !strings.Contains(r.Body, want) {
					t.Errorf("page lacks %q: %s", want, r.Body)
				}
			}
			if c.field != "prefers" && !regexp.MustCompile(`id="`+c.field+`"[^>]*aria-invalid="true"`).MatchString(r.Body) &&
				!regexp.MustCompile(`id="`+c.field+`"[^>]*aria-describedby="[^"]*`+c.field+`-error`).MatchString(r.Body) {
				t.Errorf("field %s is not marked invalid and tied to its message", c.field)
			}
			if c.p.Card != "" && len(c.p.Card) > 4 && strings.Contains(r.Body, c.p.Card) {
				t.Errorf("page echoes the card number")
			}
			nothingRecorded(t, m, inv.Id, 0)
		})
	}
}

func TestConcurrentPaymentsNeverPassTheAmount(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("RACE-PAY", "75.00"))
	path := apitest.PayPath(t, inv)
	// Ten customers, each with the form of their own page.
	tokens := func() []string {
		out := make([]string, 10)
		for i := range out {
			out[i] = apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))
		}
		return out
	}
	forms := tokens()

	statuses := make([]int, 10)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = env.Post(t, path, forms[i], apitest.Payment{Card: apitest.CardApprove, Amount: "75.00", Name: fmt.Sprintf("Payer %d", i)}).StatusCode
		}()
	}
	wg.Wait()
	approved := 0
	for i, s := range statuses {
		switch s {
		case http.StatusSeeOther:
			approved++
		case http.StatusUnprocessableEntity:
		default:
			t.Errorf("request %d: status %d", i, s)
		}
	}
	if approved != 1 {
		t.Fatalf("%d payments approved, want exactly 1 (%v)", approved, statuses)
	}
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "payments", len(*got.Payments), 1)
	apitest.Want(t, "amountPaid", got.AmountPaid.Text('f'), "75.00")
	apitest.Want(t, "status", got.Status, "paid")
	var rows int
	if err := env.App.DB.Get(&rows, `SELECT count(*) FROM card_payments WHERE invoice_id = $1 AND status = 'approved'`, inv.Id); err != nil || rows != 1 {
		t.Fatalf("%d payment rows (%v)", rows, err)
	}

	// Partial payments at once: each sees the balance the ones before it
	// left, under the row lock, so three of 30.00 fit in 100.00 and no more.
	partial := m.MustCreate(t, m.Body("RACE-PART", "100.00"))
	path = apitest.PayPath(t, partial)
	forms = tokens()
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = env.Post(t, path, forms[i], apitest.Payment{Card: apitest.CardApprove, Amount: "30.00"}).StatusCode
		}()
	}
	wg.Wait()
	approved = 0
	for i, s := range statuses {
		switch s {
		case http.StatusSeeOther:
			approved++
		case http.StatusUnprocessableEntity: // more than is left to pay
		default:
			t.Errorf("partial request %d: status %d", i, s)
		}
	}
	got, _ = m.Read(t, partial.Id)
	apitest.Want(t, "approved", approved, 3)
	apitest.Want(t, "payments", len(*got.Payments), 3)
	apitest.Want(t, "amountPaid", got.AmountPaid.Text('f'), "90.00")
	apitest.Want(t, "status", got.Status, "part_paid")
}

func TestLevel3(t *testing.T) {
	t.Parallel()
	rec := &apitest.Recorder{}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: apitest.Recording(rec)})
	m := apitest.NewMerchant(t, env)
	full := func(desc, q, c, code, uom, upc any) map[string]any {
		return map[string]any{"description": desc, "quantity": q, "unitCost": c, "commodityCode": code, "uom": uom, "upc": upc}
	}

	// The beans are taxed at 8.25 %: 20.50 × 0.0825 = 1.69125 → 1.69.
	beans := full("Coffee beans", "2", "10.25", "0901", "LB", "012345678905")
	beans["taxRate"] = "8.25"
	withData := m.MustCreate(t, m.Body("L3-ON", "27.19", beans,
		full("Filters", "1", "5.00", "4823", "EA", "036000291452")))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, withData), apitest.Payment{Card: apitest.CardApprove, Amount: "20.00"}), http.StatusSeeOther)
	got, raw := m.Read(t, withData.Id)
	if !got.Level3Sent || !(*got.Payments)[0].Level3Sent {
		t.Fatalf("level3Sent false with every line complete: %s", raw)
	}
	c := rec.Last()
	if len(c.Items) != 2 {
		t.Fatalf("%d items sent, want 2", len(c.Items))
	}
	apitest.Want(t, "items[0].commodityCode", c.Items[0].CommodityCode, "0901")
	apitest.Want(t, "items[0].uom", c.Items[0].UOM, "LB")
	apitest.Want(t, "items[0].upc", c.Items[0].UPC, "012345678905")
	apitest.Want(t, "items[0].description", c.Items[0].Description, "Coffee beans")
	apitest.Want(t, "items[0].quantity", c.Items[0].Quantity.Text('f'), "2")
	apitest.Want(t, "items[0].unitCost", c.Items[0].UnitCost.Text('f'), "10.25")
	apitest.Want(t, "items[0].lineTotal", c.Items[0].LineTotal.Text('f'), "20.50")
	apitest.Want(t, "items[1].lineTotal", c.Items[1].LineTotal.Text('f'), "5.00")
	apitest.Want(t, "items[0].taxAmount", c.Items[0].TaxAmount.Text('f'), "1.69")
	apitest.Want(t, "items[1].taxAmount", c.Items[1].TaxAmount.Text('f'), "0.00")
	apitest.Want(t, "the order's tax", c.TaxAmount.Text('f'), "1.69")
	apitest.Want(t, "charge amount", c.Amount.Text('f'), "20.00")
	apitest.Want(t, "charge merchant id", c.MerchantID, got.Mid)
	apitest.Want(t, "charge order id set", c.OrderID != "", true)

	withoutUPC := m.MustCreate(t, m.Body("L3-OFF", "25.50",
		full("Coffee beans", "2", "10.25", "0901", "LB", "012345678905"),
		full("Filters", "1", "5.00", "4823", "EA", nil)))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, withoutUPC), apitest.Payment{Card: apitest.CardApprove, Amount: "25.50"}), http.StatusSeeOther)
	got, _ = m.Read(t, withoutUPC.Id)
	apitest.Want(t, "level3Sent", got.Level3Sent, false)
	apitest.Want(t, "payments[0].level3Sent", (*got.Payments)[0].Level3Sent, false)
	apitest.Want(t, "items sent", len(rec.Last().Items), 0)

	noLines := m.MustCreate(t, m.Body("L3-NONE", "5.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, noLines), apitest.Payment{Card: apitest.CardApprove}), http.StatusSeeOther)
	if got, raw = m.Read(t, noLines.Id); got.Level3Sent || rec.Last().Items != nil {
		t.Fatalf("level 3 sent without lines: %s", raw)
	}
}

func TestPayVoidsWhenTheRecordFails(t *testing.T) {
	// An approval whose retRef PostgreSQL cannot store (a NUL byte): the
	// transaction fails after the charge, so the charge must be voided.
	rec := &apitest.Recorder{Answer: func(r processor.Result) processor.Result { r.RetRef = "bad\x00ref"; return r }}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: apitest.Recording(rec)})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("VOID-1", "10.00"))
	r := env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "10.00"})
	apitest.WantStatus(t, r, http.StatusServiceUnavailable)
	if len(rec.Voids()) != 1 || rec.Voids()[0] != rec.Last().OrderID {
		t.Fatalf("voids %v, charge order %s", rec.Voids(), rec.Last().OrderID)
	}
	nothingRecorded(t, m, inv.Id, 0)
	if !strings.Contains(env.Log.String(), "voided") {
		t.Errorf("the voided charge is not in the log")
	}

	// When the void fails too, the customer is told that the charge, if
	// any, will be cancelled; the order stays pending for the service to
	// void, and its id is logged as an error.
	rec.VoidErr = fmt.Errorf("void: %w", processor.ErrUnavailable)
	inv = m.MustCreate(t, m.Body("VOID-2", "10.00"))
	r = env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "10.00"})
	apitest.WantStatus(t, r, http.StatusServiceUnavailable)
	apitest.Want(t, "the page says the charge is cancelled automatically", strings.Contains(r.Body, "cancelled automatically"), true)
	apitest.Want(t, "the page shows the invoice", strings.Contains(r.Body, "VOID-2"), true)
	apitest.Want(t, "the page says nothing was charged", strings.Contains(r.Body, "nothing was charged"), false)
	nothingRecorded(t, m, inv.Id, 0)
	var pending int
	if err := env.App.DB.Get(&pending, `SELECT count(*) FROM pending_charges WHERE order_id = $1 AND void_after <= now()`, rec.Last().OrderID); err != nil {
		t.Fatal(err)
	}
	if pending != 1 {
		t.Errorf("the unvoided order is not pending for the service to void")
	}
	if logs := env.Log.String(); !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, rec.Last().OrderID) {
		t.Errorf("the unvoided order is not logged as an error: %s", logs)
	}
}

func TestSavedCardDelete(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("CARD-1", "30.00"))
	path := apitest.PayPath(t, inv)
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "10.00", Save: true}), http.StatusSeeOther)
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardUndeletable, Amount: "10.00", Save: true}), http.StatusSeeOther)
	got, raw := m.Read(t, inv.Id)
	if len(*got.SavedCards) != 2 {
		t.Fatalf("saved cards: %s", raw)
	}
	var card, undeletable models.SavedCard
	for _, c := range *got.SavedCards {
		if *c.LastFour == "1111" {
			card = c
		} else {
			undeletable = c
		}
	}
	del := func(token string, id string) *apitest.Response {
		return env.Do(apitest.Request{Method: "DELETE", Path: "/saved-cards/" + id, Token: token})
	}

	// Another organization cannot remove it, nor learn that it exists.
	other := apitest.NewMerchant(t, env)
	apitest.WantProblem(t, del(other.Token, card.Id.String()), http.StatusNotFound, "Not found")
	apitest.WantProblem(t, del(m.Token, uuid.NewString()), http.StatusNotFound, "Not found")
	apitest.WantProblem(t, del(m.Token, "not-a-uuid"), http.StatusBadRequest, "")

	if r := del(m.Token, card.Id.String()); r.StatusCode != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("delete: %d %s", r.StatusCode, r.Body)
	}
	apitest.WantProblem(t, del(m.Token, card.Id.String()), http.StatusNotFound, "Not found")

	// The processor fails to remove the other one: it is kept, every time.
	for range 2 {
		p := apitest.WantProblem(t, del(m.Token, undeletable.Id.String()), http.StatusBadGateway, "Card processor unavailable")
		if !strings.HasSuffix(p.Type, "/problems/bad-gateway") {
			t.Errorf("type %s", p.Type)
		}
	}
	got, raw = m.Read(t, inv.Id)
	if len(*got.SavedCards) != 1 || (*got.SavedCards)[0].Id != undeletable.Id {
		t.Fatalf("after deletes: %s", raw)
	}

	// Removing a card needs payments.create.
	viewer := env.NewKey(t, uuid.MustParse(m.Org), "payments.view")
	apitest.WantProblem(t, del(env.Token(viewer.KeyID, viewer.Secret), undeletable.Id.String()), http.StatusForbidden, "Permission required")
}

// A card saved or a preference stated on the pay page changes the
// customer: customer.updated, with the payment (the open balance as
// paid), once per change; a payment that changes neither emits none.
func TestPayPageChangesTheCustomer(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	b := m.Body("CUST-1", "50.00")
	b["customerPhone"] = "+15035550123"
	inv := m.MustCreate(t, b)
	path := apitest.PayPath(t, inv)
	updates := func() []models.Customer {
		t.Helper()
		var list []struct {
			Type string
			Data models.Customer
		}
		m.Env.Do(apitest.Request{Method: "GET", Path: "/events?limit=100", Token: m.Token}).JSON(t, &list)
		var out []models.Customer
		for _, e := range list {
			if e.Type == "customer.updated" && e.Data.Id == inv.CustomerId {
				out = append(out, e.Data)
			}
		}
		return out
	}
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "10.00", Save: true, Prefers: "text"}), http.StatusSeeOther)
	got := updates()
	if len(got) != 1 {
		t.Fatalf("after a card saved and text preferred: %d customer.updated events, want 1", len(got))
	}
	apitest.Want(t, "prefers", got[0].Prefers != nil && string(*got[0].Prefers) == "text", true)
	apitest.Want(t, "saved cards", len(got[0].SavedCards), 1)
	apitest.Want(t, "open balance as paid", got[0].OpenBalance.Text('f'), "40.00")

	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "10.00", Prefers: "text"}), http.StatusSeeOther)
	apitest.Want(t, "the same preference again changes nothing", len(updates()), 1)

	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "10.00", Prefers: "email"}), http.StatusSeeOther)
	got = updates()
	if len(got) != 2 {
		t.Fatalf("after email preferred: %d customer.updated events, want 2", len(got))
	}
	// Newest first.
	apitest.Want(t, "prefers email", got[0].Prefers != nil && string(*got[0].Prefers) == "email", true)
	apitest.Want(t, "open balance", got[0].OpenBalance.Text('f'), "20.00")
}

func TestPreferenceChangesTheNextSend(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	b := m.Body("PREF-1", "50.00")
	b["customerPhone"] = "+15035550123"
	inv := m.MustCreate(t, b)
	send := func(id uuid.UUID) models.Invoice {
		t.Helper()
		r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + id.String() + "/send", Token: m.Token})
		if r.StatusCode != http.StatusOK {
			t.Fatalf("send: %d %s", r.StatusCode, r.Body)
		}
		var out models.Invoice
		r.JSON(t, &out)
		return out
	}
	if s := send(inv.Id); *s.SentVia != "email" {
		t.Fatalf("before: sentVia %s", *s.SentVia)
	}
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "10.00", Prefers: "text"}), http.StatusSeeOther)
	if s := send(inv.Id); *s.SentVia != "text" || *s.CustomerPrefers != "text" {
		t.Fatalf("after prefers=text: sentVia %s", *s.SentVia)
	}
	// The preference is the customer's (their email, in any case), not the invoice's.
	b = m.Body("PREF-2", "5.00")
	b["customerEmail"], b["customerPhone"] = "DANA@example.com", "+15035550123"
	if s := send(m.MustCreate(t, b).Id); *s.SentVia != "text" {
		t.Fatalf("another invoice of the customer: sentVia %s", *s.SentVia)
	}
	// And it can change back.
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "10.00", Prefers: "email"}), http.StatusSeeOther)
	if s := send(inv.Id); *s.SentVia != "email" {
		t.Fatalf("after prefers=email: sentVia %s", *s.SentVia)
	}
}

func TestPayFormToken(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("CSRF-1", "10.00"))
	otherInv := m.MustCreate(t, m.Body("CSRF-2", "10.00"))
	path := apitest.PayPath(t, inv)
	good := apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))
	others := apitest.FormToken(t, env.Visit(t, "GET", apitest.PayPath(t, otherInv), nil, nil))
	if good == others {
		t.Fatalf("two pay links share a form token")
	}
	// A token names the invoice's version it was shown with, under its MAC:
	// one made to claim another version is no token.
	id, mac, _ := strings.Cut(good, ".")
	for name, r := range map[string]apitest.Page{
		"another version's": env.Post(t, path, id+".2."+mac, apitest.Payment{Card: apitest.CardApprove}),
		"a bad version's":   env.Post(t, path, id+".x."+mac, apitest.Payment{Card: apitest.CardApprove}),
		"missing":           env.Post(t, path, "", apitest.Payment{Card: apitest.CardApprove}),
		"wrong":             env.Post(t, path, flip(good), apitest.Payment{Card: apitest.CardApprove}),
		"another link's":    env.Post(t, path, others, apitest.Payment{Card: apitest.CardApprove}),
		"cross-site": env.Visit(t, "POST", path, apitest.Payment{Card: apitest.CardApprove}.Values(env, good),
			http.Header{"Sec-Fetch-Site": {"cross-site"}}),
	} {
		if r.StatusCode != http.StatusForbidden || !strings.Contains(r.Body, "Nothing was charged") {
			t.Errorf("%s token: %d %s", name, r.StatusCode, r.Body)
		}
	}
	nothingRecorded(t, m, inv.Id, 0)
	// The right token works, including from another instance of the deployment.
	apitest.WantStatus(t, env.Post(t, path, good, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"}), http.StatusSeeOther)
}

func TestPayPageSecurityHeaders(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("HDR-1", "10.00"))
	path := apitest.PayPath(t, inv)
	token := apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))
	approved := env.Post(t, path, token, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"})
	stylesheet := regexp.MustCompile(`href="(/pay/assets/style-[0-9a-f]+\.css)"`).FindStringSubmatch(env.Visit(t, "GET", path, nil, nil).Body)
	if stylesheet == nil {
		t.Fatal("no stylesheet link")
	}

	answers := map[string]apitest.Page{
		"page":            env.Visit(t, "GET", path, nil, nil),
		"approval":        approved,
		"receipt":         env.Visit(t, "GET", approved.Header.Get("Location"), nil, nil),
		"decline":         env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "1.00"}),
		"invalid":         env.Pay(t, path, apitest.Payment{Card: "1234"}),
		"forbidden":       env.Post(t, path, "nope", apitest.Payment{Card: apitest.CardApprove}),
		"unavailable":     env.Pay(t, path, apitest.Payment{Card: apitest.CardError, Amount: "1.00"}),
		"unknown link":    env.Visit(t, "GET", "/pay/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil, nil),
		"unknown receipt": env.Visit(t, "GET", path+"/receipt/"+uuid.NewString(), nil, nil),
		"unknown path":    env.Visit(t, "GET", path+"/elsewhere", nil, nil),
		"stylesheet":      env.Visit(t, "GET", stylesheet[1], nil, nil),
		"other method":    env.Visit(t, "PUT", path, nil, nil),
		"head":            env.Visit(t, "HEAD", path, nil, nil),
	}
	for name, r := range answers {
		h := r.Header
		if h.Get("Content-Security-Policy") != "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'" ||
			h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s (%d): headers %v", name, r.StatusCode, h)
		}
		if name != "stylesheet" && h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q", name, h.Get("Cache-Control"))
		}
		if name != "stylesheet" && name != "approval" && !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Errorf("%s: Content-Type %q", name, h.Get("Content-Type"))
		}
		if strings.Contains(r.Body, "<script") || strings.Contains(r.Body, "style=") {
			t.Errorf("%s: inline script or style", name)
		}
	}
	if s := answers["stylesheet"]; s.StatusCode != http.StatusOK || !strings.HasPrefix(s.Header.Get("Content-Type"), "text/css") {
		t.Errorf("stylesheet: %d %s", s.StatusCode, s.Header.Get("Content-Type"))
	}
	if r := answers["other method"]; r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD, POST" {
		t.Errorf("PUT: %d, Allow %q", r.StatusCode, r.Header.Get("Allow"))
	}
	if r := answers["head"]; r.StatusCode != http.StatusOK || r.Body != "" {
		t.Errorf("HEAD: %d %q", r.StatusCode, r.Body)
	}
	for _, name := range []string{"unknown link", "unknown receipt", "unknown path"} {
		if r := answers[name]; r.StatusCode != http.StatusNotFound || !strings.Contains(r.Body, "Invoice not found") {
			t.Errorf("%s: %d %s", name, r.StatusCode, r.Body)
		}
	}
}

func TestPayAttemptLimit(t *testing.T) {
	clock := apitest.NewClock(time.Now())
	deployment := apitest.Options{DataDir: t.TempDir(), PublicURL: "http://payreq.test", Clock: clock}
	one := apitest.New(t, testDSN, deployment)
	two := apitest.New(t, testDSN, deployment)
	m := apitest.NewMerchant(t, one)
	inv := m.MustCreate(t, m.Body("LIMIT-1", "10.00"))
	path := apitest.PayPath(t, inv)

	// Ten attempts, spread over two instances and most of an hour.
	for i := range 10 {
		env := []*apitest.Env{one, two}[i%2]
		apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "1.00"}), http.StatusPaymentRequired)
		clock.Advance(5 * time.Minute)
	}
	m.Token = one.TokenFor(t, m.Org)
	// Now 50 minutes after the first: the eleventh waits 10 minutes.
	for _, env := range []*apitest.Env{one, two} {
		r := env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"})
		apitest.WantStatus(t, r, http.StatusTooManyRequests)
		if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra != 600 {
			t.Errorf("Retry-After %q, want 600", r.Header.Get("Retry-After"))
		}
		if !strings.Contains(r.Body, "too many payment attempts") {
			t.Errorf("429 page: %s", r.Body)
		}
	}
	got, raw := m.Read(t, inv.Id)
	if got.FailedAttempts != 10 || len(*got.Payments) != 0 {
		t.Fatalf("after the limit: %s", raw)
	}
	// Viewing the page is not an attempt.
	apitest.WantStatus(t, two.Visit(t, "GET", path, nil, nil), http.StatusOK)

	// Once the first attempt is an hour old, one more is allowed.
	clock.Advance(10 * time.Minute)
	apitest.WantStatus(t, two.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"}), http.StatusSeeOther)
	apitest.WantStatus(t, one.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"}), http.StatusTooManyRequests)

	// Links are limited one by one.
	m.Token = one.TokenFor(t, m.Org)
	another := m.MustCreate(t, m.Body("LIMIT-2", "10.00"))
	apitest.WantStatus(t, one.Pay(t, apitest.PayPath(t, another), apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"}), http.StatusSeeOther)
}

// A POST without the page's form token is refused and does not count
// against the link, so a stranger holding the link cannot lock its customer
// out; it counts against its address, which is limited across every pay page.
func TestPayLimitsCountFormsFromThePageAndAddresses(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	path := apitest.PayPath(t, m.MustCreate(t, m.Body("LIMIT-RACE", "10.00")))
	statuses := make([]int, 15)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = env.Post(t, path, "", apitest.Payment{Card: apitest.CardApprove}).StatusCode
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusForbidden {
			t.Errorf("POST %d without a form token: %d, want 403", i, s)
		}
	}
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"}), http.StatusSeeOther)

	// 16 POSTs from this address so far; 60 an hour are allowed, across links.
	other := apitest.PayPath(t, m.MustCreate(t, m.Body("LIMIT-ADDR", "10.00")))
	for range 60 - 16 {
		apitest.WantStatus(t, env.Post(t, other, "", apitest.Payment{Card: apitest.CardApprove}), http.StatusForbidden)
	}
	r := env.Pay(t, other, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"})
	apitest.WantStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// Another address is not held back.
	env.Client = apitest.ClientFrom(apitest.SourceAddress())
	apitest.WantStatus(t, env.Pay(t, other, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"}), http.StatusSeeOther)
}

// An IPv6 customer is limited by the /64 its address is in, which one
// subscriber holds whole: 60 POSTs from one address of it, and the next
// from another address of it is refused; another /64 is not held back.
func TestPayAddressLimitPerIPv6Network(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) {
		_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
		c.TrustedProxies = []*net.IPNet{loopback}
	}})
	m := apitest.NewMerchant(t, env)
	path := apitest.PayPath(t, m.MustCreate(t, m.Body("LIMIT-V6", "10.00")))
	network := fmt.Sprintf("2001:db8:%x:%x:", rand.Uint32N(1<<16), rand.Uint32N(1<<16)) // unused by earlier runs
	from := func(address string) http.Header { return http.Header{"X-Forwarded-For": {address}} }
	form := apitest.Payment{Card: apitest.CardApprove}.Values(env, "")
	for i := range payment.AddressLimit {
		// Without a form token: refused, and counted against the address.
		apitest.WantStatus(t, env.Visit(t, "POST", path, form, from(network+":"+strconv.Itoa(i+1))), http.StatusForbidden)
	}
	apitest.WantStatus(t, env.Visit(t, "POST", path, form, from(network+"ffff:ffff:ffff:ffff")), http.StatusTooManyRequests)
	apitest.WantStatus(t, env.Visit(t, "POST", path, form, from(strings.Replace(network, "2001:db8:", "2001:db9:", 1)+":1")), http.StatusForbidden)
}

func TestPayPageStates(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("STATE-1", "10.00"))
	path := apitest.PayPath(t, inv)
	token := apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))
	r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/cancel", Token: m.Token})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", r.StatusCode)
	}
	cancelled := env.Visit(t, "GET", path, nil, nil)
	apitest.WantStatus(t, cancelled, http.StatusOK)
	apitest.Want(t, "the cancelled page has a form", strings.Contains(cancelled.Body, "<form"), false)
	apitest.Want(t, "the cancelled page asks for a card", strings.Contains(cancelled.Body, "cardNumber"), false)
	apitest.Want(t, "the cancelled page says it was cancelled", strings.Contains(cancelled.Body, "was cancelled"), true)
	late := env.Post(t, path, token, apitest.Payment{Card: apitest.CardApprove, Amount: "10.00"})
	apitest.WantStatus(t, late, http.StatusUnprocessableEntity)
	if strings.Contains(late.Body, "<form") {
		t.Fatalf("POST on a cancelled invoice shows a form")
	}
	got, raw := m.Read(t, inv.Id)
	if len(*got.Payments) != 0 || got.Status != "cancelled" {
		t.Fatalf("cancelled invoice took a payment: %s", raw)
	}

	for _, p := range []string{"/pay/unknown-token-0000000000000000000", "/pay/x", "/pay/%3Cscript%3E", path + "/receipt/not-a-uuid"} {
		r := env.Visit(t, "GET", p, nil, nil)
		apitest.Want(t, "GET "+p+": status", r.StatusCode, http.StatusNotFound)
		apitest.Want(t, "GET "+p+": says not found", strings.Contains(r.Body, "Invoice not found"), true)
		apitest.Want(t, "GET "+p+": has a form", strings.Contains(r.Body, "<form"), false)
	}
	if r := env.Visit(t, "POST", "/pay/unknown-token-0000000000000000000", url.Values{"cardNumber": {apitest.CardApprove}}, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("POST unknown link: %d", r.StatusCode)
	}

	// A receipt is found only under its own invoice's link.
	paid := m.MustCreate(t, m.Body("STATE-2", "10.00"))
	loc := env.Pay(t, apitest.PayPath(t, paid), apitest.Payment{Card: apitest.CardApprove}).Header.Get("Location")
	id := receiptPath.FindStringSubmatch(loc)[1]
	if r := env.Visit(t, "GET", path+"/receipt/"+id, nil, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("receipt under another link: %d", r.StatusCode)
	}
}

func TestPayPageEscapesInvoiceFields(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	evil := `<script>alert("x")</script>`
	l := apitest.Line("1", "10.00")
	l["description"] = `<img src=x onerror=alert(1)>` + evil
	b := m.Body(`INV-<b>1</b>`, "10.00", l)
	b["memo"], b["customerName"], b["poNumber"] = "Thanks!\n"+evil, `Dana "<i>"`, `PO-<svg onload=alert(1)>`
	inv := m.MustCreate(t, b)
	path := apitest.PayPath(t, inv)
	for _, r := range []apitest.Page{
		env.Visit(t, "GET", path, nil, nil),
		env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "1.00", Name: `<script>alert("name")</script>`}),
	} {
		for _, raw := range []string{"<script", "<img", "<svg", "<b>1", "<i>"} {
			if strings.Contains(r.Body, raw) {
				t.Errorf("page (%d) contains %q unescaped", r.StatusCode, raw)
			}
		}
		if !strings.Contains(r.Body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") || !strings.Contains(r.Body, "INV-&lt;b&gt;1&lt;/b&gt;") {
			t.Errorf("escaped fields missing: %s", r.Body)
		}
	}
}

func TestCardDataNeverStoredOrLogged(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("PCI-1", "40.00"))
	path := apitest.PayPath(t, inv)

	declined := env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "10.00", Save: true})
	invalid := env.Pay(t, path, apitest.Payment{Card: "4111-1111-1111-1112", Amount: "10.00"})
	failed := env.Pay(t, path, apitest.Payment{Card: apitest.CardError, Amount: "10.00"})
	approved := env.Pay(t, path, apitest.Payment{Card: "4111-1111-1111-1111", Amount: "10.00", Save: true, Prefers: "email"})
	apitest.WantStatus(t, approved, http.StatusSeeOther)
	receipt := env.Visit(t, "GET", approved.Header.Get("Location"), nil, nil)
	rest := env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "30.00"})
	apitest.WantStatus(t, rest, http.StatusSeeOther)

	numbers := []string{apitest.CardApprove, apitest.CardDecline, apitest.CardError, "4111111111111112", "4111-1111-1111-1111", "4111-1111-1111-1112"}
	for name, r := range map[string]apitest.Page{"decline": declined, "invalid": invalid, "failed": failed, "receipt": receipt} {
		for _, n := range numbers {
			if strings.Contains(r.Body, n) {
				t.Errorf("%s page contains the card number %s", name, n)
			}
		}
		if strings.Contains(r.Body, `value="`+apitest.TestCVV+`"`) {
			t.Errorf("%s page contains the security code", name)
		}
	}
	logs := env.Log.String()
	if !strings.Contains(logs, `"path":"/pay/:token"`) {
		t.Fatalf("the pay page's requests are not in the log: %s", logs)
	}
	// The security code is short enough to turn up inside ids and
	// durations by chance, so the log is searched for it as a value.
	for _, n := range append(numbers, `"`+apitest.TestCVV+`"`, "="+apitest.TestCVV, "cvv", "cardNumber") {
		if strings.Contains(logs, n) {
			t.Errorf("the log contains %q", n)
		}
	}
	// Nor does the database, anywhere a payment goes.
	for _, table := range []string{"card_payments", "saved_cards", "invoices", "customers", "pay_limits", "pay_submissions", "outbox"} {
		var n int
		q := fmt.Sprintf(`SELECT count(*) FROM %s t WHERE t::text LIKE '%%' || $1 || '%%'`, table)
		for _, num := range numbers {
			if err := env.App.DB.Get(&n, q, num); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%s holds the card number %s", table, num)
			}
		}
	}
}

// The pages say who bills: the location's receipt name, the organization's
// name, the location's address, phone and email; times in the location's
// time zone. A cancelled invoice's state stands first, with no balance due
// and how to reach the business.
func TestPagesSayWhoBills(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	var loc models.Location
	for _, l := range m.Locs {
		if l.Id == m.MIDs[0].LocationId {
			loc = l
		}
	}
	var org string
	if err := env.App.DB.Get(&org, `SELECT name FROM organizations WHERE id = $1`, m.Org); err != nil {
		t.Fatal(err)
	}
	if loc.ReceiptName == nil || loc.Phone == nil || loc.Email == nil {
		t.Fatalf("the demo location lacks a receipt name, phone or email: %+v", loc)
	}
	whoBills := []string{*loc.ReceiptName, org, loc.AddressLine1, loc.City + ", " + loc.State + " " + loc.PostalCode, *loc.Phone, *loc.Email}
	wantAll := func(page string, body string) {
		t.Helper()
		for _, want := range whoBills {
			if !strings.Contains(html.UnescapeString(body), want) {
				t.Errorf("%s lacks %q", page, want)
			}
		}
	}

	inv := m.MustCreate(t, m.Body("WHO-1", "25.00"))
	path := apitest.PayPath(t, inv)
	wantAll("pay page", env.Visit(t, "GET", path, nil, nil).Body)

	// A decline says so once, and that the card fields were emptied.
	declined := env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "5.00"})
	apitest.Want(t, `times "declined" is said`, strings.Count(strings.ToLower(declined.Body), "declined"), 1)
	apitest.Want(t, "the page says the card fields were emptied", strings.Contains(declined.Body, "card number and security code were not kept"), true)

	receipt := env.Visit(t, "GET", env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "5.00"}).Header.Get("Location"), nil, nil)
	apitest.WantStatus(t, receipt, http.StatusOK)
	wantAll("receipt", receipt.Body)
	got, _ := m.Read(t, inv.Id)
	zone, err := time.LoadLocation(loc.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	paidAt := (*got.Payments)[0].PaidAt.In(zone).Format("January 2, 2006, 3:04 PM MST")
	apitest.Want(t, "the receipt gives the time in the location's zone ("+paidAt+")", strings.Contains(receipt.Body, paidAt), true)
	apitest.Want(t, "the receipt's acknowledgement is a heading", strings.Contains(receipt.Body, `<h1 class="alert-heading">Payment received`), true)

	if r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/cancel", Token: m.Token}); r.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.StatusCode, r.Body)
	}
	cancelled := html.UnescapeString(env.Visit(t, "GET", path, nil, nil).Body)
	wantAll("cancelled page", cancelled)
	state, header := strings.Index(cancelled, "was cancelled"), strings.Index(cancelled, "Invoice from")
	apitest.Want(t, "the cancelled state stands before the invoice", state >= 0 && state < header, true)
	apitest.Want(t, "the cancelled page shows a balance due", strings.Contains(cancelled, "Balance due"), false)
	contact := "contact " + *loc.ReceiptName + " at " + *loc.Phone + " or " + *loc.Email
	apitest.Want(t, "the cancelled page says how to reach the business", strings.Contains(cancelled, contact), true)
}

// Pages and the stylesheet go compressed to a client that accepts gzip,
// and plain to one that does not.
func TestPagesAreCompressed(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	path := apitest.PayPath(t, m.MustCreate(t, m.Body("GZIP-1", "25.00")))
	page := env.Visit(t, "GET", path, nil, nil).Body
	stylesheet := regexp.MustCompile(`href="(/pay/assets/style-[0-9a-f]+\.css)"`).FindStringSubmatch(page)
	if stylesheet == nil {
		t.Fatalf("no stylesheet link in the page")
	}
	for path, want := range map[string]string{path: "<!doctype html>", stylesheet[1]: "box-sizing"} {
		r := env.Visit(t, "GET", path, nil, http.Header{"Accept-Encoding": {"gzip"}})
		apitest.WantStatus(t, r, http.StatusOK)
		apitest.Want(t, path+": Content-Encoding", r.Header.Get("Content-Encoding"), "gzip")
		apitest.Want(t, path+": Vary names Accept-Encoding", strings.Contains(r.Header.Get("Vary"), "Accept-Encoding"), true)
		zr, err := gzip.NewReader(strings.NewReader(r.Body))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		apitest.Want(t, path+": the compressed body holds the document", strings.Contains(string(plain), want), true)

		r = env.Visit(t, "GET", path, nil, http.Header{"Accept-Encoding": {"identity"}})
		apitest.Want(t, path+": Content-Encoding without gzip accepted", r.Header.Get("Content-Encoding"), "")
		apitest.Want(t, path+": the plain body holds the document", strings.Contains(r.Body, want), true)
	}
}
