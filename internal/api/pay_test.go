package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/processor"
)

// Cards of the simulator (decisions.md), and one more that approves but
// whose stored profile cannot be deleted (it ends in 0119).
const (
	cardApprove     = processor.TestCardApprove // 4111111111111111
	cardDecline     = processor.TestCardDecline // 4000000000000002
	cardError       = processor.TestCardError   // 4000000000000119
	cardUndeletable = "4111111111150119"
	testCVV         = "9317"
)

// page is an HTML answer of the pay page.
type page struct {
	*http.Response
	Body string
}

// visit sends a request to a pay page; pages are not in openapi.yaml, so
// this goes around env.Do's contract check.
func visit(t *testing.T, env *apitest.Env, method, path string, form url.Values, header http.Header) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, env.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := env.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{Response: resp, Body: string(b)}
}

// payPath is the path of an invoice's pay link.
func payPath(t *testing.T, inv gen.Invoice) string {
	t.Helper()
	u, err := url.Parse(*inv.Link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path
}

var formTokenPattern = regexp.MustCompile(`name="csrfToken" value="([^"]+)"`)

// formToken is the form token of a pay page.
func formToken(t *testing.T, p page) string {
	t.Helper()
	m := formTokenPattern.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no form token on the page (%d): %s", p.StatusCode, p.Body)
	}
	return m[1]
}

// futureExpiry is MMYY two years from the env's clock.
func futureExpiry(env *apitest.Env) string {
	t := env.Clock.Now().AddDate(2, 0, 0)
	return fmt.Sprintf("%02d%02d", int(t.Month()), t.Year()%100)
}

// payment is the form a customer fills in.
type payment struct {
	card, amount, name, prefers, expiry, cvv string
	save                                     bool
}

// pay opens the pay page (for its form token) and posts the form.
func pay(t *testing.T, env *apitest.Env, path string, p payment) page {
	t.Helper()
	return post(t, env, path, formToken(t, visit(t, env, "GET", path, nil, nil)), p)
}

func post(t *testing.T, env *apitest.Env, path, token string, p payment) page {
	t.Helper()
	return visit(t, env, "POST", path, p.values(env, token), nil)
}

func (p payment) values(env *apitest.Env, token string) url.Values {
	v := url.Values{"csrfToken": {token}, "cardNumber": {p.card}, "amount": {p.amount}, "cardholderName": {p.name},
		"expiry": {p.expiry}, "cvv": {p.cvv}, "prefers": {p.prefers}}
	if p.name == "" {
		v.Set("cardholderName", "Dana Whitfield")
	}
	if p.expiry == "" {
		v.Set("expiry", futureExpiry(env))
	}
	if p.cvv == "" {
		v.Set("cvv", testCVV)
	}
	if p.save {
		v.Set("saveCard", "on")
	}
	return v
}

// read reads an invoice through the API.
func (m merchant) read(t *testing.T, id uuid.UUID) (gen.Invoice, string) {
	t.Helper()
	r := m.env.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + id.String(), Token: m.token})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("get: %d %s", r.StatusCode, r.Body)
	}
	var inv gen.Invoice
	r.JSON(t, &inv)
	return inv, string(r.Body)
}

// nothingRecorded checks that an invoice still has no payment.
func (m merchant) nothingRecorded(t *testing.T, id uuid.UUID, failedAttempts int32) {
	t.Helper()
	inv, raw := m.read(t, id)
	if len(*inv.Payments) != 0 || inv.AmountPaid.Text('f') != "0.00" || inv.Status != "open" || int32(inv.FailedAttempts) != failedAttempts {
		t.Fatalf("want nothing recorded and %d failed attempts: %s", failedAttempts, raw)
	}
}

func wantStatus(t *testing.T, p page, status int) {
	t.Helper()
	if p.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", p.StatusCode, status, p.Body)
	}
}

var receiptPath = regexp.MustCompile(`^/pay/[A-Za-z0-9_-]+/receipt/([0-9a-f-]{36})$`)

func TestPayPartThenFull(t *testing.T) {
	// Whole seconds, so times read back from the database compare equal.
	env := apitest.New(t, testDSN, apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	m := newMerchant(t, env)
	b := m.body("PAY-1", "100.00", ln("2", "30.00"), ln("1", "40.00"))
	b["customerEmail"], b["customerPhone"] = "Dana.W@Example.com", "+15035550123"
	inv := mustCreate(t, m, b)
	path := payPath(t, inv)

	shown := visit(t, env, "GET", path, nil, nil)
	wantStatus(t, shown, http.StatusOK)
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
	first := pay(t, env, path, payment{card: "4111 1111 1111 1111", amount: "40", name: "Dana Whitfield", prefers: "text", save: true})
	wantStatus(t, first, http.StatusSeeOther)
	loc := first.Header.Get("Location")
	match := receiptPath.FindStringSubmatch(loc)
	if match == nil || !strings.HasPrefix(loc, path+"/receipt/") {
		t.Fatalf("Location %q", loc)
	}
	paidAt := env.Clock.Now()

	got, raw := m.read(t, inv.Id)
	if got.AmountPaid.Text('f') != "40.00" || got.Balance.Text('f') != "60.00" || got.Status != "part_paid" || got.PaidAt != nil ||
		got.FailedAttempts != 0 || got.Level3Sent {
		t.Fatalf("after part payment: %s", raw)
	}
	if len(*got.Payments) != 1 {
		t.Fatalf("payments: %s", raw)
	}
	p := (*got.Payments)[0]
	if p.Amount.Text('f') != "40.00" || *p.LastFour != "1111" || p.RetRef == nil || *p.RetRef == "" || *p.PayerName != "Dana Whitfield" ||
		p.Level3Sent || !p.SavedCard || !p.PaidAt.Equal(paidAt) {
		t.Fatalf("payment: %s", raw)
	}
	if !strings.Contains(raw, `"amountPaid":"40.00"`) || !strings.Contains(raw, `"balance":"60.00"`) || !strings.Contains(raw, `"amount":"40.00"`) {
		t.Errorf("amounts not as strings with two decimals: %s", raw)
	}
	if len(*got.SavedCards) != 1 {
		t.Fatalf("saved cards: %s", raw)
	}
	card := (*got.SavedCards)[0]
	if *card.LastFour != "1111" || *card.CardBrand != "Visa" || *card.Expiry != futureExpiry(env) || card.SavedByName != "Dana Whitfield" ||
		!card.SavedAt.Equal(paidAt) {
		t.Fatalf("saved card: %s", raw)
	}
	if got.CustomerPrefers == nil || *got.CustomerPrefers != "text" {
		t.Fatalf("customerPrefers: %s", raw)
	}
	var stored struct {
		Email     string `db:"customer_email"`
		ProfileID string `db:"profile_id"`
	}
	if err := env.App.DB.Get(&stored, `SELECT customer_email, profile_id FROM saved_cards WHERE id = $1`, card.Id); err != nil {
		t.Fatal(err)
	}
	if stored.Email != "dana.w@example.com" || stored.ProfileID == "" {
		t.Errorf("saved card row: %+v", stored)
	}

	receipt := visit(t, env, "GET", loc, nil, nil)
	wantStatus(t, receipt, http.StatusOK)
	for _, want := range []string{"$40.00", "Visa ending in 1111", *p.RetRef, "$60.00", "PAY-1", "Dana Whitfield"} {
		if !strings.Contains(receipt.Body, want) {
			t.Errorf("receipt lacks %q: %s", want, receipt.Body)
		}
	}

	// The rest, with the amount left empty: it defaults to the balance.
	env.Clock.Advance(time.Minute)
	second := pay(t, env, path, payment{card: cardApprove, amount: "", name: "Sam Whitfield"})
	wantStatus(t, second, http.StatusSeeOther)
	got, raw = m.read(t, inv.Id)
	if got.AmountPaid.Text('f') != "100.00" || got.Balance.Text('f') != "0.00" || got.Status != "paid" || got.PaidAt == nil ||
		!got.PaidAt.Equal(env.Clock.Now()) || len(*got.Payments) != 2 {
		t.Fatalf("after full payment: %s", raw)
	}
	p2 := (*got.Payments)[1]
	if p2.Amount.Text('f') != "60.00" || *p2.PayerName != "Sam Whitfield" || p2.SavedCard || *p2.RetRef == *p.RetRef || len(*got.SavedCards) != 1 {
		t.Fatalf("second payment: %s", raw)
	}
	// The first receipt still says what the balance was right after it.
	if r := visit(t, env, "GET", loc, nil, nil); !strings.Contains(r.Body, "$60.00") {
		t.Errorf("first receipt changed: %s", r.Body)
	}
	if r := visit(t, env, "GET", second.Header.Get("Location"), nil, nil); !strings.Contains(r.Body, "$0.00") {
		t.Errorf("second receipt lacks the new balance: %s", r.Body)
	}

	// Paid: the page shows it and no form; a late POST charges nothing.
	paid := visit(t, env, "GET", path, nil, nil)
	wantStatus(t, paid, http.StatusOK)
	if strings.Contains(paid.Body, "<form") || !strings.Contains(paid.Body, "paid in full") {
		t.Fatalf("paid page: %s", paid.Body)
	}
	late := post(t, env, path, formToken(t, shown), payment{card: cardApprove, amount: "1.00"})
	wantStatus(t, late, http.StatusConflict)
	if strings.Contains(late.Body, "<form") {
		t.Errorf("late POST shows a form")
	}
	if got, raw = m.read(t, inv.Id); len(*got.Payments) != 2 {
		t.Fatalf("late POST recorded something: %s", raw)
	}
}

func TestPayDeclined(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	inv := mustCreate(t, m, m.body("DEC-1", "25.00"))
	path := payPath(t, inv)

	for i := 1; i <= 2; i++ {
		r := pay(t, env, path, payment{card: cardDecline, amount: "25.00", save: true, prefers: "text"})
		wantStatus(t, r, http.StatusPaymentRequired)
		if !strings.Contains(r.Body, "declined") || !strings.Contains(r.Body, "Card declined by the issuer") || !strings.Contains(r.Body, "<form") {
			t.Fatalf("decline page: %s", r.Body)
		}
		if strings.Contains(r.Body, cardDecline) || strings.Contains(r.Body, testCVV) {
			t.Fatalf("decline page echoes the card number or security code")
		}
		if !strings.Contains(r.Body, `value="Dana Whitfield"`) {
			t.Errorf("decline page lost the cardholder name")
		}
		m.nothingRecorded(t, inv.Id, int32(i))
	}
	got, raw := m.read(t, inv.Id)
	if len(*got.SavedCards) != 0 || got.CustomerPrefers != nil {
		t.Fatalf("a decline saved a card or a preference: %s", raw)
	}
}

func TestPayProcessorUnavailable(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	inv := mustCreate(t, m, m.body("ERR-1", "25.00"))
	r := pay(t, env, payPath(t, inv), payment{card: cardError, amount: "25.00"})
	wantStatus(t, r, http.StatusServiceUnavailable)
	if !strings.Contains(r.Body, "try again") || !strings.Contains(r.Body, "<form") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("unavailable page: %v %s", r.Header, r.Body)
	}
	if strings.Contains(r.Body, cardError) {
		t.Fatalf("page echoes the card number")
	}
	m.nothingRecorded(t, inv.Id, 0)
}

func TestPayValidation(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	cases := []struct {
		name, field, message string
		p                    payment
	}{
		{"more than the balance", "amount", "at most the balance of $100.00", payment{card: cardApprove, amount: "100.01"}},
		{"three decimals", "amount", "at most two decimal places", payment{card: cardApprove, amount: "12.345"}},
		{"zero", "amount", "more than $0.00", payment{card: cardApprove, amount: "0"}},
		{"negative", "amount", "dollars and cents", payment{card: cardApprove, amount: "-5"}},
		{"not a number", "amount", "dollars and cents", payment{card: cardApprove, amount: "ten"}},
		{"exponent", "amount", "dollars and cents", payment{card: cardApprove, amount: "1e1"}},
		{"Luhn", "cardNumber", "not valid", payment{card: "4111111111111112", amount: "1"}},
		{"card too short", "cardNumber", "12 to 19 digits", payment{card: "4111", amount: "1"}},
		{"card missing", "cardNumber", "Enter the card number", payment{card: "", amount: "1"}},
		{"expired", "expiry", "expired", payment{card: cardApprove, amount: "1", expiry: "0120"}},
		{"month 13", "expiry", "01 to 12", payment{card: cardApprove, amount: "1", expiry: "1399"}},
		{"expiry shape", "expiry", "MMYY", payment{card: cardApprove, amount: "1", expiry: "1"}},
		{"cvv two digits", "cvv", "3 or 4 digits", payment{card: cardApprove, amount: "1", cvv: "12"}},
		{"cvv letters", "cvv", "3 or 4 digits", payment{card: cardApprove, amount: "1", cvv: "12a"}},
		{"name blank", "cardholderName", "name on the card", payment{card: cardApprove, amount: "1", name: "   "}},
		{"prefers unknown", "prefers", "Choose email", payment{card: cardApprove, amount: "1", prefers: "pigeon"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A link per case: every POST counts toward the link's attempt limit.
			inv := mustCreate(t, m, m.body(fmt.Sprintf("VAL-%d", i), "100.00"))
			r := pay(t, env, payPath(t, inv), c.p)
			wantStatus(t, r, http.StatusBadRequest)
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
			if c.p.card != "" && len(c.p.card) > 4 && strings.Contains(r.Body, c.p.card) {
				t.Errorf("page echoes the card number")
			}
			m.nothingRecorded(t, inv.Id, 0)
		})
	}
}

func TestConcurrentPaymentsNeverPassTheAmount(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	inv := mustCreate(t, m, m.body("RACE-PAY", "75.00"))
	path := payPath(t, inv)
	// Ten customers, each with the form of their own page.
	tokens := func() []string {
		out := make([]string, 10)
		for i := range out {
			out[i] = formToken(t, visit(t, env, "GET", path, nil, nil))
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
			statuses[i] = post(t, env, path, forms[i], payment{card: cardApprove, amount: "75.00", name: fmt.Sprintf("Payer %d", i)}).StatusCode
		}()
	}
	wg.Wait()
	approved := 0
	for i, s := range statuses {
		switch s {
		case http.StatusSeeOther:
			approved++
		case http.StatusConflict:
		default:
			t.Errorf("request %d: status %d", i, s)
		}
	}
	if approved != 1 {
		t.Fatalf("%d payments approved, want exactly 1 (%v)", approved, statuses)
	}
	got, raw := m.read(t, inv.Id)
	if len(*got.Payments) != 1 || got.AmountPaid.Text('f') != "75.00" || got.Status != "paid" {
		t.Fatalf("after the race: %s", raw)
	}
	var rows int
	if err := env.App.DB.Get(&rows, `SELECT count(*) FROM payments WHERE invoice_id = $1`, inv.Id); err != nil || rows != 1 {
		t.Fatalf("%d payment rows (%v)", rows, err)
	}

	// Partial payments at once: each sees the balance the ones before it
	// left, under the row lock, so three of 30.00 fit in 100.00 and no more.
	partial := mustCreate(t, m, m.body("RACE-PART", "100.00"))
	path = payPath(t, partial)
	forms = tokens()
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = post(t, env, path, forms[i], payment{card: cardApprove, amount: "30.00"}).StatusCode
		}()
	}
	wg.Wait()
	approved = 0
	for i, s := range statuses {
		switch s {
		case http.StatusSeeOther:
			approved++
		case http.StatusBadRequest: // more than the balance left
		default:
			t.Errorf("partial request %d: status %d", i, s)
		}
	}
	got, raw = m.read(t, partial.Id)
	if approved != 3 || len(*got.Payments) != 3 || got.AmountPaid.Text('f') != "90.00" || got.Status != "part_paid" {
		t.Fatalf("%d approved; after the partial race: %s", approved, raw)
	}
}

// recorder wraps the processor and remembers what it was asked.
type recorder struct {
	processor.Processor
	mu      sync.Mutex
	charges []processor.Charge
	voids   []string
	// answer, when set, replaces the processor's answer to a charge.
	answer func(processor.Result) processor.Result
	// voidErr, when set, is every void's answer.
	voidErr error
}

func (r *recorder) AuthorizeCapture(ctx context.Context, c processor.Charge) (processor.Result, error) {
	res, err := r.Processor.AuthorizeCapture(ctx, c)
	r.mu.Lock()
	defer r.mu.Unlock()
	c.Card = processor.Card{} // keep nothing of the card, even in a test
	r.charges = append(r.charges, c)
	if r.answer != nil && err == nil {
		res = r.answer(res)
	}
	return res, err
}

func (r *recorder) Void(ctx context.Context, merchantID, orderID string) error {
	r.mu.Lock()
	r.voids = append(r.voids, orderID)
	r.mu.Unlock()
	if r.voidErr != nil {
		return r.voidErr
	}
	return r.Processor.Void(ctx, merchantID, orderID)
}

func (r *recorder) last() processor.Charge {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.charges[len(r.charges)-1]
}

func recording(rec *recorder) func(processor.Processor) processor.Processor {
	return func(p processor.Processor) processor.Processor {
		rec.Processor = p
		return rec
	}
}

func TestLevel3(t *testing.T) {
	rec := &recorder{}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: recording(rec)})
	m := newMerchant(t, env)
	full := func(desc, q, c, code, uom, upc any) map[string]any {
		return map[string]any{"description": desc, "quantity": q, "unitCost": c, "commodityCode": code, "uom": uom, "upc": upc}
	}

	withData := mustCreate(t, m, m.body("L3-ON", "25.50",
		full("Coffee beans", "2", "10.25", "0901", "LB", "012345678905"),
		full("Filters", "1", "5.00", "4823", "EA", "036000291452")))
	wantStatus(t, pay(t, env, payPath(t, withData), payment{card: cardApprove, amount: "20.00"}), http.StatusSeeOther)
	got, raw := m.read(t, withData.Id)
	if !got.Level3Sent || !(*got.Payments)[0].Level3Sent {
		t.Fatalf("level3Sent false with every line complete: %s", raw)
	}
	c := rec.last()
	if len(c.Items) != 2 || c.Items[0].CommodityCode != "0901" || c.Items[0].UOM != "LB" || c.Items[0].UPC != "012345678905" ||
		c.Items[0].Description != "Coffee beans" || c.Items[0].Quantity.Text('f') != "2" || c.Items[0].UnitCost.Text('f') != "10.25" ||
		c.Items[0].LineTotal.Text('f') != "20.50" || c.Items[1].LineTotal.Text('f') != "5.00" {
		t.Fatalf("items sent: %+v", c.Items)
	}
	if c.Amount.Text('f') != "20.00" || c.MerchantID != got.Mid || c.OrderID == "" {
		t.Fatalf("charge: %+v", c)
	}

	withoutUPC := mustCreate(t, m, m.body("L3-OFF", "25.50",
		full("Coffee beans", "2", "10.25", "0901", "LB", "012345678905"),
		full("Filters", "1", "5.00", "4823", "EA", nil)))
	wantStatus(t, pay(t, env, payPath(t, withoutUPC), payment{card: cardApprove, amount: "25.50"}), http.StatusSeeOther)
	got, raw = m.read(t, withoutUPC.Id)
	if got.Level3Sent || (*got.Payments)[0].Level3Sent || rec.last().Items != nil {
		t.Fatalf("level 3 sent with a line lacking its UPC: %s", raw)
	}

	noLines := mustCreate(t, m, m.body("L3-NONE", "5.00"))
	wantStatus(t, pay(t, env, payPath(t, noLines), payment{card: cardApprove}), http.StatusSeeOther)
	if got, raw = m.read(t, noLines.Id); got.Level3Sent || rec.last().Items != nil {
		t.Fatalf("level 3 sent without lines: %s", raw)
	}
}

func TestPayVoidsWhenTheRecordFails(t *testing.T) {
	// An approval whose retRef PostgreSQL cannot store (a NUL byte): the
	// transaction fails after the charge, so the charge must be voided.
	rec := &recorder{answer: func(r processor.Result) processor.Result { r.RetRef = "bad\x00ref"; return r }}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: recording(rec)})
	m := newMerchant(t, env)
	inv := mustCreate(t, m, m.body("VOID-1", "10.00"))
	r := pay(t, env, payPath(t, inv), payment{card: cardApprove, amount: "10.00"})
	wantStatus(t, r, http.StatusServiceUnavailable)
	if len(rec.voids) != 1 || rec.voids[0] != rec.last().OrderID {
		t.Fatalf("voids %v, charge order %s", rec.voids, rec.last().OrderID)
	}
	m.nothingRecorded(t, inv.Id, 0)
	if !strings.Contains(env.Log.String(), "voided") {
		t.Errorf("the voided charge is not in the log")
	}

	// When the void fails too, the customer is told that the charge, if
	// any, will be cancelled; the order stays pending for the service to
	// void, and its id is logged as an error.
	rec.voidErr = fmt.Errorf("void: %w", processor.ErrUnavailable)
	inv = mustCreate(t, m, m.body("VOID-2", "10.00"))
	r = pay(t, env, payPath(t, inv), payment{card: cardApprove, amount: "10.00"})
	wantStatus(t, r, http.StatusServiceUnavailable)
	if !strings.Contains(r.Body, "cancelled automatically") || !strings.Contains(r.Body, "VOID-2") ||
		strings.Contains(r.Body, "nothing was charged") {
		t.Fatalf("void failure page: %s", r.Body)
	}
	m.nothingRecorded(t, inv.Id, 0)
	var pending int
	if err := env.App.DB.Get(&pending, `SELECT count(*) FROM pending_charges WHERE order_id = $1 AND void_after <= now()`, rec.last().OrderID); err != nil {
		t.Fatal(err)
	}
	if pending != 1 {
		t.Errorf("the unvoided order is not pending for the service to void")
	}
	if logs := env.Log.String(); !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, rec.last().OrderID) {
		t.Errorf("the unvoided order is not logged as an error: %s", logs)
	}
}

func TestSavedCardDelete(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	inv := mustCreate(t, m, m.body("CARD-1", "30.00"))
	path := payPath(t, inv)
	wantStatus(t, pay(t, env, path, payment{card: cardApprove, amount: "10.00", save: true}), http.StatusSeeOther)
	wantStatus(t, pay(t, env, path, payment{card: cardUndeletable, amount: "10.00", save: true}), http.StatusSeeOther)
	got, raw := m.read(t, inv.Id)
	if len(*got.SavedCards) != 2 {
		t.Fatalf("saved cards: %s", raw)
	}
	var card, undeletable gen.SavedCard
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
	other := newMerchant(t, env)
	wantProblem(t, del(other.token, card.Id.String()), http.StatusNotFound, "Not found")
	wantProblem(t, del(m.token, uuid.NewString()), http.StatusNotFound, "Not found")
	wantProblem(t, del(m.token, "not-a-uuid"), http.StatusBadRequest, "")

	if r := del(m.token, card.Id.String()); r.StatusCode != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("delete: %d %s", r.StatusCode, r.Body)
	}
	wantProblem(t, del(m.token, card.Id.String()), http.StatusNotFound, "Not found")

	// The processor fails to remove the other one: it is kept, every time.
	for range 2 {
		p := wantProblem(t, del(m.token, undeletable.Id.String()), http.StatusBadGateway, "Card processor unavailable")
		if !strings.HasSuffix(p.Type, "/problems/bad-gateway") {
			t.Errorf("type %s", p.Type)
		}
	}
	got, raw = m.read(t, inv.Id)
	if len(*got.SavedCards) != 1 || (*got.SavedCards)[0].Id != undeletable.Id {
		t.Fatalf("after deletes: %s", raw)
	}

	// Removing a card needs payments.create.
	viewer := newKey(t, env, uuid.MustParse(m.org), "payments.view")
	wantProblem(t, del(env.Token(viewer.KeyID, viewer.Secret), undeletable.Id.String()), http.StatusForbidden, "Permission required")
}

func TestPreferenceChangesTheNextSend(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	b := m.body("PREF-1", "50.00")
	b["customerPhone"] = "+15035550123"
	inv := mustCreate(t, m, b)
	send := func(id uuid.UUID) gen.Invoice {
		t.Helper()
		r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + id.String() + "/send", Token: m.token})
		if r.StatusCode != http.StatusOK {
			t.Fatalf("send: %d %s", r.StatusCode, r.Body)
		}
		var out gen.Invoice
		r.JSON(t, &out)
		return out
	}
	if s := send(inv.Id); *s.SentVia != "email" {
		t.Fatalf("before: sentVia %s", *s.SentVia)
	}
	wantStatus(t, pay(t, env, payPath(t, inv), payment{card: cardApprove, amount: "10.00", prefers: "text"}), http.StatusSeeOther)
	if s := send(inv.Id); *s.SentVia != "text" || *s.CustomerPrefers != "text" {
		t.Fatalf("after prefers=text: sentVia %s", *s.SentVia)
	}
	// The preference is the customer's (their email, in any case), not the invoice's.
	b = m.body("PREF-2", "5.00")
	b["customerEmail"], b["customerPhone"] = "DANA@example.com", "+15035550123"
	if s := send(mustCreate(t, m, b).Id); *s.SentVia != "text" {
		t.Fatalf("another invoice of the customer: sentVia %s", *s.SentVia)
	}
	// And it can change back.
	wantStatus(t, pay(t, env, payPath(t, inv), payment{card: cardApprove, amount: "10.00", prefers: "email"}), http.StatusSeeOther)
	if s := send(inv.Id); *s.SentVia != "email" {
		t.Fatalf("after prefers=email: sentVia %s", *s.SentVia)
	}
}

func TestPayFormToken(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	inv := mustCreate(t, m, m.body("CSRF-1", "10.00"))
	otherInv := mustCreate(t, m, m.body("CSRF-2", "10.00"))
	path := payPath(t, inv)
	good := formToken(t, visit(t, env, "GET", path, nil, nil))
	others := formToken(t, visit(t, env, "GET", payPath(t, otherInv), nil, nil))
	if good == others {
		t.Fatalf("two pay links share a form token")
	}
	for name, r := range map[string]page{
		"missing":        post(t, env, path, "", payment{card: cardApprove}),
		"wrong":          post(t, env, path, flip(good), payment{card: cardApprove}),
		"another link's": post(t, env, path, others, payment{card: cardApprove}),
		"cross-site": visit(t, env, "POST", path, payment{card: cardApprove}.values(env, good),
			http.Header{"Sec-Fetch-Site": {"cross-site"}}),
	} {
		if r.StatusCode != http.StatusForbidden || !strings.Contains(r.Body, "Nothing was charged") {
			t.Errorf("%s token: %d %s", name, r.StatusCode, r.Body)
		}
	}
	m.nothingRecorded(t, inv.Id, 0)
	// The right token works, including from another instance of the deployment.
	wantStatus(t, post(t, env, path, good, payment{card: cardApprove, amount: "1.00"}), http.StatusSeeOther)
}

// flip changes a token's first character.
func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

func TestPayPageSecurityHeaders(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	inv := mustCreate(t, m, m.body("HDR-1", "10.00"))
	path := payPath(t, inv)
	token := formToken(t, visit(t, env, "GET", path, nil, nil))
	approved := post(t, env, path, token, payment{card: cardApprove, amount: "1.00"})
	stylesheet := regexp.MustCompile(`href="(/pay/assets/style-[0-9a-f]+\.css)"`).FindStringSubmatch(visit(t, env, "GET", path, nil, nil).Body)
	if stylesheet == nil {
		t.Fatal("no stylesheet link")
	}

	answers := map[string]page{
		"page":            visit(t, env, "GET", path, nil, nil),
		"approval":        approved,
		"receipt":         visit(t, env, "GET", approved.Header.Get("Location"), nil, nil),
		"decline":         pay(t, env, path, payment{card: cardDecline, amount: "1.00"}),
		"invalid":         pay(t, env, path, payment{card: "1234"}),
		"forbidden":       post(t, env, path, "nope", payment{card: cardApprove}),
		"unavailable":     pay(t, env, path, payment{card: cardError, amount: "1.00"}),
		"unknown link":    visit(t, env, "GET", "/pay/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil, nil),
		"unknown receipt": visit(t, env, "GET", path+"/receipt/"+uuid.NewString(), nil, nil),
		"unknown path":    visit(t, env, "GET", path+"/elsewhere", nil, nil),
		"stylesheet":      visit(t, env, "GET", stylesheet[1], nil, nil),
		"other method":    visit(t, env, "PUT", path, nil, nil),
		"head":            visit(t, env, "HEAD", path, nil, nil),
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
	m := newMerchant(t, one)
	inv := mustCreate(t, m, m.body("LIMIT-1", "10.00"))
	path := payPath(t, inv)

	// Ten attempts, spread over two instances and most of an hour.
	for i := range 10 {
		env := []*apitest.Env{one, two}[i%2]
		wantStatus(t, pay(t, env, path, payment{card: cardDecline, amount: "1.00"}), http.StatusPaymentRequired)
		clock.Advance(5 * time.Minute)
	}
	m.token = tokenFor(t, one, m.org)
	// Now 50 minutes after the first: the eleventh waits 10 minutes.
	for _, env := range []*apitest.Env{one, two} {
		r := pay(t, env, path, payment{card: cardApprove, amount: "1.00"})
		wantStatus(t, r, http.StatusTooManyRequests)
		if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra != 600 {
			t.Errorf("Retry-After %q, want 600", r.Header.Get("Retry-After"))
		}
		if !strings.Contains(r.Body, "too many payment attempts") {
			t.Errorf("429 page: %s", r.Body)
		}
	}
	got, raw := m.read(t, inv.Id)
	if got.FailedAttempts != 10 || len(*got.Payments) != 0 {
		t.Fatalf("after the limit: %s", raw)
	}
	// Viewing the page is not an attempt.
	wantStatus(t, visit(t, two, "GET", path, nil, nil), http.StatusOK)

	// Once the first attempt is an hour old, one more is allowed.
	clock.Advance(10 * time.Minute)
	wantStatus(t, pay(t, two, path, payment{card: cardApprove, amount: "1.00"}), http.StatusSeeOther)
	wantStatus(t, pay(t, one, path, payment{card: cardApprove, amount: "1.00"}), http.StatusTooManyRequests)

	// Links are limited one by one.
	m.token = tokenFor(t, one, m.org)
	another := mustCreate(t, m, m.body("LIMIT-2", "10.00"))
	wantStatus(t, pay(t, one, payPath(t, another), payment{card: cardApprove, amount: "1.00"}), http.StatusSeeOther)
}

// A POST without the page's form token is refused and does not count
// against the link, so a stranger holding the link cannot lock its customer
// out; it counts against its address, which is limited across every pay page.
func TestPayLimitsCountFormsFromThePageAndAddresses(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	path := payPath(t, mustCreate(t, m, m.body("LIMIT-RACE", "10.00")))
	statuses := make([]int, 15)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = post(t, env, path, "", payment{card: cardApprove}).StatusCode
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusForbidden {
			t.Errorf("POST %d without a form token: %d, want 403", i, s)
		}
	}
	wantStatus(t, pay(t, env, path, payment{card: cardApprove, amount: "1.00"}), http.StatusSeeOther)

	// 16 POSTs from this address so far; 60 an hour are allowed, across links.
	other := payPath(t, mustCreate(t, m, m.body("LIMIT-ADDR", "10.00")))
	for range 60 - 16 {
		wantStatus(t, post(t, env, other, "", payment{card: cardApprove}), http.StatusForbidden)
	}
	r := pay(t, env, other, payment{card: cardApprove, amount: "1.00"})
	wantStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// Another address is not held back.
	env.Client = apitest.ClientFrom(apitest.SourceAddress())
	wantStatus(t, pay(t, env, other, payment{card: cardApprove, amount: "1.00"}), http.StatusSeeOther)
}

func TestPayPageStates(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	inv := mustCreate(t, m, m.body("STATE-1", "10.00"))
	path := payPath(t, inv)
	token := formToken(t, visit(t, env, "GET", path, nil, nil))
	r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/cancel", Token: m.token})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", r.StatusCode)
	}
	cancelled := visit(t, env, "GET", path, nil, nil)
	wantStatus(t, cancelled, http.StatusOK)
	if strings.Contains(cancelled.Body, "<form") || strings.Contains(cancelled.Body, "cardNumber") || !strings.Contains(cancelled.Body, "was cancelled") {
		t.Fatalf("cancelled page: %s", cancelled.Body)
	}
	late := post(t, env, path, token, payment{card: cardApprove, amount: "10.00"})
	wantStatus(t, late, http.StatusConflict)
	if strings.Contains(late.Body, "<form") {
		t.Fatalf("POST on a cancelled invoice shows a form")
	}
	got, raw := m.read(t, inv.Id)
	if len(*got.Payments) != 0 || got.Status != "cancelled" {
		t.Fatalf("cancelled invoice took a payment: %s", raw)
	}

	for _, p := range []string{"/pay/unknown-token-0000000000000000000", "/pay/x", "/pay/%3Cscript%3E", path + "/receipt/not-a-uuid"} {
		r := visit(t, env, "GET", p, nil, nil)
		if r.StatusCode != http.StatusNotFound || !strings.Contains(r.Body, "Invoice not found") || strings.Contains(r.Body, "<form") {
			t.Errorf("GET %s: %d %s", p, r.StatusCode, r.Body)
		}
	}
	if r := visit(t, env, "POST", "/pay/unknown-token-0000000000000000000", url.Values{"cardNumber": {cardApprove}}, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("POST unknown link: %d", r.StatusCode)
	}

	// A receipt is found only under its own invoice's link.
	paid := mustCreate(t, m, m.body("STATE-2", "10.00"))
	loc := pay(t, env, payPath(t, paid), payment{card: cardApprove}).Header.Get("Location")
	id := receiptPath.FindStringSubmatch(loc)[1]
	if r := visit(t, env, "GET", path+"/receipt/"+id, nil, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("receipt under another link: %d", r.StatusCode)
	}
}

func TestPayPageEscapesInvoiceFields(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := newMerchant(t, env)
	evil := `<script>alert("x")</script>`
	l := ln("1", "10.00")
	l["description"] = `<img src=x onerror=alert(1)>` + evil
	b := m.body(`INV-<b>1</b>`, "10.00", l)
	b["memo"], b["customerName"], b["poNumber"] = "Thanks!\n"+evil, `Dana "<i>"`, `PO-<svg onload=alert(1)>`
	inv := mustCreate(t, m, b)
	path := payPath(t, inv)
	for _, r := range []page{
		visit(t, env, "GET", path, nil, nil),
		pay(t, env, path, payment{card: cardDecline, amount: "1.00", name: `<script>alert("name")</script>`}),
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
	m := newMerchant(t, env)
	inv := mustCreate(t, m, m.body("PCI-1", "40.00"))
	path := payPath(t, inv)

	declined := pay(t, env, path, payment{card: cardDecline, amount: "10.00", save: true})
	invalid := pay(t, env, path, payment{card: "4111-1111-1111-1112", amount: "10.00"})
	failed := pay(t, env, path, payment{card: cardError, amount: "10.00"})
	approved := pay(t, env, path, payment{card: "4111-1111-1111-1111", amount: "10.00", save: true, prefers: "email"})
	wantStatus(t, approved, http.StatusSeeOther)
	receipt := visit(t, env, "GET", approved.Header.Get("Location"), nil, nil)
	rest := pay(t, env, path, payment{card: cardApprove, amount: "30.00"})
	wantStatus(t, rest, http.StatusSeeOther)

	numbers := []string{cardApprove, cardDecline, cardError, "4111111111111112", "4111-1111-1111-1111", "4111-1111-1111-1112"}
	for name, r := range map[string]page{"decline": declined, "invalid": invalid, "failed": failed, "receipt": receipt} {
		for _, n := range numbers {
			if strings.Contains(r.Body, n) {
				t.Errorf("%s page contains the card number %s", name, n)
			}
		}
		if strings.Contains(r.Body, `value="`+testCVV+`"`) {
			t.Errorf("%s page contains the security code", name)
		}
	}
	logs := env.Log.String()
	if !strings.Contains(logs, `"path":"/pay/:token"`) {
		t.Fatalf("the pay page's requests are not in the log: %s", logs)
	}
	// The security code is short enough to turn up inside ids and
	// durations by chance, so the log is searched for it as a value.
	for _, n := range append(numbers, `"`+testCVV+`"`, "="+testCVV, "cvv", "cardNumber") {
		if strings.Contains(logs, n) {
			t.Errorf("the log contains %q", n)
		}
	}
	// Nor does the database, anywhere a payment goes.
	for _, table := range []string{"payments", "saved_cards", "invoices", "customer_preferences", "pay_limits", "pay_submissions", "outbox"} {
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
