package api_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf/pdftest"
)

// invoiceEvents are the types of the invoice's events, oldest first.
func invoiceEvents(t *testing.T, m apitest.Merchant, id uuid.UUID) []string {
	t.Helper()
	var list []struct {
		Type string
		Data struct{ Id string }
	}
	m.Env.Do(apitest.Request{Method: "GET", Path: "/events?limit=100", Token: m.Token}).JSON(t, &list)
	var types []string
	for _, e := range slices.Backward(list) {
		if e.Data.Id == id.String() {
			types = append(types, e.Type)
		}
	}
	return types
}

// patch sends a merge patch of the invoice.
func patch(m apitest.Merchant, id uuid.UUID, body any, ifMatch string) *apitest.Response {
	h := http.Header{"Content-Type": {"application/merge-patch+json"}}
	if ifMatch != "" {
		h.Set("If-Match", ifMatch)
	}
	return m.Env.Do(apitest.Request{Method: "PATCH", Path: "/payment-requests/" + id.String(), Token: m.Token, Body: body, Header: h})
}

func invoiceOf(t *testing.T, resp *apitest.Response, status int) models.Invoice {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%d %s, want %d", resp.StatusCode, resp.Body, status)
	}
	var inv models.Invoice
	resp.JSON(t, &inv)
	if got, want := resp.Header.Get("ETag"), `"`+strconv.Itoa(int(inv.Version))+`"`; got != want {
		t.Errorf("ETag %q, want %q", got, want)
	}
	return inv
}

// A draft: made with no link and nothing sent, refused by send, cancel
// and its pay link; changed; finalized into an open invoice whose link is
// sent; then neither finalized nor deleted again.
func TestDraftThroughTheAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	b := m.Body("DRAFT-1", "91.00", apitest.Line(2, "45.5"))
	b["send"], b["draft"] = nil, true
	draft := invoiceOf(t, m.Create(t, b, nil), http.StatusCreated)
	apitest.Want(t, "status", draft.Status, models.InvoiceStatusDraft)
	apitest.Want(t, "link", draft.Link == nil, true)
	apitest.Want(t, "sentAt", draft.SentAt == nil, true)
	apitest.Want(t, "version", draft.Version, int32(1))
	// Its token, were it a link, is nothing.
	token := env.App.Invoices.Link(&invoice.Invoice{ID: draft.Id})
	apitest.WantStatus(t, env.Visit(t, "GET", strings.TrimPrefix(token, env.URL), nil, nil), http.StatusNotFound)

	for _, c := range []struct{ op, title string }{{"send", "Invoice cannot be sent"}, {"cancel", "Invoice cannot be cancelled"}} {
		apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + draft.Id.String() + "/" + c.op, Token: m.Token}),
			http.StatusUnprocessableEntity, c.title)
	}
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + draft.Id.String() + "/payments", Token: m.Token,
		Body: map[string]any{"amount": "1.00", "method": "cash"}}), http.StatusUnprocessableEntity, "Invoice cannot be paid")

	changed := invoiceOf(t, patch(m, draft.Id, map[string]any{"memo": "See you Friday"}, `"1"`), http.StatusOK)
	apitest.Want(t, "version", changed.Version, int32(2))
	apitest.Want(t, "still a draft", changed.Status, models.InvoiceStatusDraft)

	open := invoiceOf(t, env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + draft.Id.String() + "/finalize", Token: m.Token}), http.StatusOK)
	apitest.Want(t, "status", open.Status, models.InvoiceStatusOpen)
	apitest.Want(t, "link", apitest.Text(open.Link), token)
	apitest.Want(t, "sent", open.SentAt != nil, true)
	apitest.WantText(t, "memo", open.Memo, "See you Friday")
	apitest.WantStatus(t, env.Visit(t, "GET", apitest.PayPath(t, open), nil, nil), http.StatusOK)

	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + draft.Id.String() + "/finalize", Token: m.Token}),
		http.StatusUnprocessableEntity, "Invoice cannot be finalized")
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "DELETE", Path: "/payment-requests/" + draft.Id.String(), Token: m.Token}),
		http.StatusUnprocessableEntity, "Invoice cannot be deleted")
	apitest.Want(t, "events", strings.Join(invoiceEvents(t, m, draft.Id), " "), "invoice.created invoice.updated invoice.finalized invoice.sent")
}

// A draft with send true or a sendAt is refused, keyed by that field; so
// is finalizing with sendAt and send false. Finalize takes send false,
// sendAt, or no body.
func TestDraftSendRefusals(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	later := env.Clock.Now().Add(48 * time.Hour).UTC().Format("2006-01-02T15:04:05Z")
	for _, c := range []struct {
		field string
		value any
	}{{"send", true}, {"sendAt", later}} {
		b := m.Body("DRAFT-"+c.field, "5.00")
		b["send"], b["draft"], b[c.field] = nil, true, c.value
		resp := m.Create(t, b, nil)
		apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
		if p := resp.Problem(t); p.Errors == nil || len((*p.Errors)[c.field]) == 0 {
			t.Errorf("%s: errors %v", c.field, p.Errors)
		}
	}
	b := m.Body("DRAFT-OK", "5.00")
	b["draft"] = true // send false is allowed
	draft := invoiceOf(t, m.Create(t, b, nil), http.StatusCreated)
	finalize := func(body any) *apitest.Response {
		return env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + draft.Id.String() + "/finalize", Token: m.Token, Body: body})
	}
	resp := finalize(map[string]any{"send": false, "sendAt": later})
	apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
	apitest.WantProblem(t, finalize(map[string]any{"sendAt": "2020-01-01T00:00:00Z"}), http.StatusBadRequest, "Invalid request")
	apitest.WantProblem(t, finalize(map[string]any{"sent": true}), http.StatusBadRequest, "Invalid request")
	scheduled := invoiceOf(t, finalize(map[string]any{"sendAt": later}), http.StatusOK)
	apitest.Want(t, "scheduled", scheduled.ScheduledSendAt != nil && scheduled.SentAt == nil, true)

	b = m.Body("DRAFT-QUIET", "5.00")
	b["draft"] = true
	quiet := m.MustCreate(t, b)
	got := invoiceOf(t, env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + quiet.Id.String() + "/finalize", Token: m.Token,
		Body: map[string]any{"send": false}}), http.StatusOK)
	apitest.Want(t, "open, unsent", got.Status == models.InvoiceStatusOpen && got.SentAt == nil, true)
}

// Deleting a draft: 204, then its id is unknown; invoice.deleted.
func TestDeleteDraftThroughTheAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	b := m.Body("DRAFT-DEL", "5.00")
	b["draft"] = true
	draft := m.MustCreate(t, b)
	del := func() *apitest.Response {
		return env.Do(apitest.Request{Method: "DELETE", Path: "/payment-requests/" + draft.Id.String(), Token: m.Token})
	}
	apitest.Want(t, "delete", del().StatusCode, http.StatusNoContent)
	apitest.WantProblem(t, del(), http.StatusNotFound, "Not found")
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + draft.Id.String(), Token: m.Token}),
		http.StatusNotFound, "Not found")
	apitest.Want(t, "events", strings.Join(invoiceEvents(t, m, draft.Id), " "), "invoice.created invoice.deleted")
}

// A merge patch: members given replace, null clears, lines without amount
// make the amount; every creation rule holds; a stale If-Match is a 412
// and changes nothing; an invoice with a payment cannot be changed.
func TestPatchPaymentRequest(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	b := m.Body("EDIT-1", "10.00", apitest.Line(1, "10"))
	b["poNumber"], b["memo"] = "PO-1", "Thanks"
	inv := m.MustCreate(t, b)
	m.MustCreate(t, m.Body("EDIT-TAKEN", "1.00"))

	got := invoiceOf(t, patch(m, inv.Id, map[string]any{"customerName": "Dana Whitfeld", "poNumber": nil,
		"lines": []any{apitest.Line(3, "2.005"), apitest.Line(1, -1)}}, `"1"`), http.StatusOK)
	apitest.Want(t, "amount", got.Amount.Text('f'), "5.02")
	apitest.Want(t, "poNumber cleared", got.PoNumber == nil, true)
	apitest.WantText(t, "memo kept", got.Memo, "Thanks")
	apitest.WantText(t, "customerName", got.CustomerName, "Dana Whitfeld")
	apitest.Want(t, "lines", got.Lines, int32(2))
	apitest.Want(t, "link kept", apitest.Text(got.Link), apitest.Text(inv.Link))
	apitest.Want(t, "version", got.Version, int32(2))
	read, _ := m.Read(t, inv.Id)
	apitest.Want(t, "read version", read.Version, int32(2))
	// The PDF is the invoice as changed, its ETag the version.
	pdf := env.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + inv.Id.String(), Token: m.Token,
		Header: http.Header{"Accept": {"application/pdf"}}})
	apitest.Want(t, "PDF ETag", pdf.Header.Get("ETag"), `"2"`)
	if doc := pdftest.Read(t, pdf.Body); !strings.Contains(doc.Text, "$5.02") || !strings.Contains(doc.Text, "Dana Whitfeld") {
		t.Errorf("the PDF is not the invoice as changed:\n%s", doc.Text)
	}

	stale := patch(m, inv.Id, map[string]any{"memo": "lost"}, `"1"`)
	apitest.WantProblem(t, stale, http.StatusPreconditionFailed, "Invoice changed")
	apitest.Want(t, "problem type", strings.HasSuffix(stale.Problem(t).Type, "/problems/precondition-failed"), true)
	apitest.WantProblem(t, patch(m, inv.Id, map[string]any{"memo": "lost"}, `W/"2"`), http.StatusPreconditionFailed, "Invoice changed")
	read, _ = m.Read(t, inv.Id)
	apitest.WantText(t, "memo after 412", read.Memo, "Thanks")

	// application/json works too, and so does If-Match: * or a list.
	resp := env.Do(apitest.Request{Method: "PATCH", Path: "/payment-requests/" + inv.Id.String(), Token: m.Token,
		Body: map[string]any{"memo": nil}, Header: http.Header{"If-Match": {`"7", "2"`}}})
	apitest.Want(t, "memo cleared", invoiceOf(t, resp, http.StatusOK).Memo == nil, true)

	for _, c := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"send", map[string]any{"send": true}, "send"},
		{"sendAt", map[string]any{"sendAt": "2030-01-01T00:00:00Z"}, "sendAt"},
		{"draft", map[string]any{"draft": true}, "draft"},
		{"amount null", map[string]any{"amount": nil}, "amount"},
		{"amount off the lines", map[string]any{"amount": "9.00"}, "lines"},
		{"email", map[string]any{"customerEmail": "not an address"}, "customerEmail"},
		{"text without a phone", map[string]any{"delivery": "text"}, "customerPhone"},
		{"no lines", map[string]any{"lines": []any{}}, "lines"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := patch(m, inv.Id, c.body, "")
			apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
			if p := resp.Problem(t); p.Errors == nil || len((*p.Errors)[c.field]) == 0 {
				t.Errorf("errors %v, want %s", p.Errors, c.field)
			}
		})
	}
	apitest.WantProblem(t, patch(m, inv.Id, map[string]any{"invoiceNumber": "EDIT-TAKEN"}, ""), http.StatusUnprocessableEntity, "Invoice number already used")
	apitest.WantProblem(t, patch(m, inv.Id, map[string]any{"merchantAccountId": uuid.NewString()}, ""), http.StatusUnprocessableEntity, "Unknown merchant account")
	apitest.WantProblem(t, patch(m, uuid.New(), map[string]any{"memo": "x"}, ""), http.StatusNotFound, "Not found")
	apitest.Want(t, "xml", env.Do(apitest.Request{Method: "PATCH", Path: "/payment-requests/" + inv.Id.String(), Token: m.Token,
		Body: "<memo/>", Header: http.Header{"Content-Type": {"application/xml"}}}).StatusCode, http.StatusUnsupportedMediaType)
	read, _ = m.Read(t, inv.Id)
	apitest.Want(t, "version after refusals", read.Version, int32(3))

	// A recorded payment: no more changes.
	if resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/payments", Token: m.Token,
		Body: map[string]any{"amount": "1.00", "method": "cash"}}); resp.StatusCode != http.StatusCreated || resp.Header.Get("ETag") != `"3"` {
		t.Fatalf("record: %d %s ETag %q", resp.StatusCode, resp.Body, resp.Header.Get("ETag"))
	}
	p := apitest.WantProblem(t, patch(m, inv.Id, map[string]any{"memo": "x"}, ""), http.StatusUnprocessableEntity, "Invoice cannot be changed")
	apitest.Want(t, "detail", p.Detail, "An invoice with payments cannot be changed; cancel it and make a new one.")
	apitest.Want(t, "events", strings.Join(invoiceEvents(t, m, inv.Id), " "),
		"invoice.created invoice.updated invoice.updated invoice.part_paid")
}

// Two changes at once with the same If-Match: one is made, the other 412.
func TestConcurrentPatchesWithOneIfMatch(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("EDIT-RACE", "10.00"))
	for round := range 5 {
		etag := `"` + strconv.Itoa(round+1) + `"`
		statuses := make([]int, 2)
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Go(func() { statuses[i] = patch(m, inv.Id, map[string]any{"memo": uuid.NewString()}, etag).StatusCode })
		}
		wg.Wait()
		slices.Sort(statuses)
		if statuses[0] != http.StatusOK || statuses[1] != http.StatusPreconditionFailed {
			t.Fatalf("round %d: %v, want one 200 and one 412", round, statuses)
		}
	}
}

// The pay form posted while a change commits, on two connections, a
// hundred times: either the payment is charged at the amount it was shown
// and the change refused, or the change is made and the payment charges
// nothing (the page says the invoice changed). Never a charge at an
// amount the invoice no longer has.
func TestPatchRacesPayment(t *testing.T) {
	t.Parallel()
	rec := &apitest.Recorder{}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: apitest.Recording(rec)})
	m := apitest.NewMerchant(t, env)
	paidRounds, changedRounds := 0, 0
	for round := range 100 {
		inv := m.MustCreate(t, m.Body("RACE-"+uuid.NewString()[:8], "10.00"))
		env.Client = apitest.ClientFrom(apitest.SourceAddress()) // the pay page's limit per address
		path := apitest.PayPath(t, inv)
		token := apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))
		var (
			wg    sync.WaitGroup
			page  apitest.Page
			edit  int
			start = make(chan struct{})
		)
		wg.Go(func() {
			<-start
			page = env.Post(t, path, token, apitest.Payment{Card: apitest.CardApprove, Amount: "10.00"})
		})
		wg.Go(func() {
			<-start
			edit = patch(m, inv.Id, map[string]any{"amount": "20.00"}, "").StatusCode
		})
		close(start)
		wg.Wait()
		after, _ := m.Read(t, inv.Id)
		switch {
		case page.StatusCode == http.StatusSeeOther && edit == http.StatusUnprocessableEntity:
			paidRounds++
			if after.Status != models.InvoiceStatusPaid || after.Amount.Text('f') != "10.00" || after.Version != 1 {
				t.Fatalf("round %d: paid, but the invoice is %s %s v%d", round, after.Status, after.Amount.Text('f'), after.Version)
			}
		case edit == http.StatusOK && page.StatusCode == http.StatusUnprocessableEntity:
			changedRounds++
			if !strings.Contains(page.Body, "This invoice was changed after the page was shown, so nothing was charged.") {
				t.Fatalf("round %d: the page does not say the invoice changed: %s", round, page.Body)
			}
			if after.Status != models.InvoiceStatusOpen || after.Amount.Text('f') != "20.00" || after.AmountPaid.Text('f') != "0.00" {
				t.Fatalf("round %d: changed, but the invoice is %s %s paid %s", round, after.Status, after.Amount.Text('f'), after.AmountPaid.Text('f'))
			}
		default:
			t.Fatalf("round %d: pay %d, change %d", round, page.StatusCode, edit)
		}
	}
	charges := rec.Charges()
	if len(charges) != paidRounds {
		t.Errorf("%d charges for %d paid rounds", len(charges), paidRounds)
	}
	for _, c := range charges {
		if c.Amount.Text('f') != "10.00" {
			t.Errorf("a charge of %s", c.Amount.Text('f'))
		}
	}
	t.Logf("%d rounds paid first, %d changed first", paidRounds, changedRounds)
}

// A pay form shown before a change and posted after it charges nothing
// and shows the page again, saying the invoice changed; the page as shown
// now pays the changed amount.
func TestPayFormShownBeforeAChange(t *testing.T) {
	t.Parallel()
	rec := &apitest.Recorder{}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: apitest.Recording(rec)})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("SHOWN-1", "10.00"))
	path := apitest.PayPath(t, inv)
	old := apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))
	invoiceOf(t, patch(m, inv.Id, map[string]any{"amount": "12.50"}, `"1"`), http.StatusOK)
	page := env.Post(t, path, old, apitest.Payment{Card: apitest.CardApprove, Amount: "10.00"})
	apitest.WantStatus(t, page, http.StatusUnprocessableEntity)
	for _, want := range []string{"This invoice was changed after the page was shown, so nothing was charged.", "$12.50"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	apitest.Want(t, "charges", len(rec.Charges()), 0)
	apitest.WantStatus(t, env.Post(t, path, apitest.FormToken(t, page), apitest.Payment{Card: apitest.CardApprove, Amount: "12.50"}), http.StatusSeeOther)
	last := rec.Last()
	apitest.Want(t, "charged", last.Amount.Text('f'), "12.50")
}

// Lines changed without an amount make the amount their total, tax
// included, and the tax and each line's rate are kept as changed.
func TestPatchLinesWithTax(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("EDIT-TAX", "40.00", map[string]any{"description": "Beans", "quantity": 2, "unitCost": "20.00", "uom": nil, "commodityCode": nil, "upc": nil}))
	got := invoiceOf(t, patch(m, inv.Id, map[string]any{"lines": []map[string]any{
		{"description": "Beans", "quantity": 2, "unitCost": "20.00", "taxRate": "8.25", "uom": nil, "commodityCode": nil, "upc": nil},
		{"description": "Discount", "quantity": 1, "unitCost": "-5.00", "taxRate": "8.25", "uom": nil, "commodityCode": nil, "upc": nil},
	}}, ""), http.StatusOK)
	apitest.Want(t, "amount", got.Amount.Text('f'), "37.89") // 40.00 + 3.30 - 5.00 - 0.41
	apitest.Want(t, "subtotal", got.Subtotal.Text('f'), "35.00")
	apitest.Want(t, "tax", got.TaxAmount.Text('f'), "2.89")
	read, _ := m.Read(t, inv.Id)
	apitest.Want(t, "tax read back", read.TaxAmount.Text('f'), "2.89")
	apitest.Want(t, "second line's tax read back", (*read.LineItems)[1].TaxAmount.Text('f'), "-0.41")
	// Lines that add up to another amount than the one given: refused as on creation.
	apitest.Want(t, "lines off the amount", patch(m, inv.Id, map[string]any{"amount": "40.00"}, "").StatusCode, http.StatusBadRequest)
}

// A change names the invoice's customer as creation does: another
// customer (its email with it), a new email (its customer found or made),
// and a tax-exempt customer refuses taxed lines.
func TestPatchCustomer(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("EDIT-CUST", "40.00"))
	exempt := newCustomer(t, m, map[string]any{"email": "school@example.org", "name": "Elm Street School", "taxExempt": true})

	got := invoiceOf(t, patch(m, inv.Id, map[string]any{"customerId": exempt.Id}, ""), http.StatusOK)
	apitest.Want(t, "customer", got.CustomerId, exempt.Id)
	apitest.WantText(t, "email taken from the customer", got.CustomerEmail, "school@example.org")
	taxed := []map[string]any{{"description": "Beans", "quantity": 2, "unitCost": "20.00", "taxRate": "8.25", "uom": nil, "commodityCode": nil, "upc": nil}}
	apitest.WantProblem(t, patch(m, inv.Id, map[string]any{"lines": taxed}, ""), http.StatusUnprocessableEntity, "Customer is tax-exempt")

	got = invoiceOf(t, patch(m, inv.Id, map[string]any{"customerEmail": "new.buyer@example.com"}, ""), http.StatusOK)
	if got.CustomerId == exempt.Id {
		t.Fatal("a new email kept the old customer")
	}
	made := readCustomer(t, m, got.CustomerId)
	apitest.Want(t, "the customer made for the new email", made.Email, "new.buyer@example.com")
	invoiceOf(t, patch(m, inv.Id, map[string]any{"lines": taxed, "amount": "43.30"}, ""), http.StatusOK)
	apitest.WantProblem(t, patch(m, inv.Id, map[string]any{"customerId": uuid.NewString()}, ""), http.StatusUnprocessableEntity, "Unknown customer")
}
