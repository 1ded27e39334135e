package portal_test

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/terminal"
)

// terminalEnv is a portal on a database of its own (its worker claims
// every pending payment there), whose simulated terminals answer at once.
func terminalEnv(t *testing.T) *apitest.Env {
	t.Helper()
	env, _ := newOwnEnv(t)
	env.App.Terminals.Terminals.(*processor.SimTerminals).TerminalDelay = 20 * time.Millisecond
	return env
}

// addTerminal registers a terminal of the kind (processor.SimTerminalOK,
// …) on the MID, and pings the terminals.
func addTerminal(t *testing.T, env *apitest.Env, mid uuid.UUID, kind, name string) terminal.Terminal {
	t.Helper()
	tm, err := env.App.Terminals.Add(t.Context(), terminal.NewTerminal{MerchantAccountID: mid, HSN: kind + uuid.NewString()[:8], Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.App.Terminals.Ping(t.Context(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return tm
}

func workTerminals(t *testing.T, env *apitest.Env) {
	t.Helper()
	if _, err := env.App.Terminals.Work(context.Background(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
}

var paymentPath = regexp.MustCompile(`^/portal/terminal-payments/[0-9a-f-]{36}$`)

// collect sends the collect form of the invoice's page for the terminal
// and amount, and answers the waiting page's path.
func collect(t *testing.T, c *portaltest.Client, invoiceID, terminalID uuid.UUID, amount string) string {
	t.Helper()
	path := "/portal/invoices/" + invoiceID.String() + "/terminal"
	p := c.Get(path).Want(t, http.StatusOK)
	resp := c.Post(path, p.CSRF(t), form("idempotencyKey", formKey(t, p), "terminalId", terminalID.String(), "amount", amount)).
		Want(t, http.StatusSeeOther)
	loc := resp.Header.Get("Location")
	if !paymentPath.MatchString(loc) {
		t.Fatalf("collect redirected to %q", loc)
	}
	return loc
}

func TestTerminalsPageListsAddsRenamesAndRemoves(t *testing.T) {
	t.Parallel()
	env := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	front := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalOK, "Front counter")
	addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalOffline, "Back office")

	// A member with accounts.view sees them, in words, and no forms.
	viewer, _ := portaltest.SignedIn(t, env, org, "Member", auth.AccountsView)
	p := viewer.Get("/portal/terminals").Want(t, http.StatusOK).
		Has(t, "Front counter", "Back office", m.MIDs[0].Mid, front.HSN, "Online", "Offline", "Just now", "Never", `href="/portal/terminals"`)
	if strings.Contains(p.Body, "Add a terminal") || strings.Contains(p.Body, `href="/portal/terminals/`+front.ID.String()) {
		t.Errorf("a Member is offered to manage terminals:\n%s", p.Body)
	}
	viewer.Post("/portal/terminals", p.CSRF(t), form("name", "Till", "mid", m.MIDs[0].Id.String(), "hsn", "SIM-OK-x")).Want(t, http.StatusForbidden)
	viewer.Get("/portal/terminals/"+front.ID.String()).Want(t, http.StatusForbidden)
	nobody, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	nobody.Get("/portal/terminals").Want(t, http.StatusForbidden)
	if strings.Contains(nobody.Get("/portal/").Body, `href="/portal/terminals"`) {
		t.Error("the navigation links Terminals for a member without accounts.view")
	}

	// An Admin adds one: refusals beside their fields, nothing written.
	admin, _ := portaltest.SignedIn(t, env, org, "Admin", auth.AccountsView)
	p = admin.Get("/portal/terminals").Want(t, http.StatusOK).Has(t, "Add a terminal")
	admin.Post("/portal/terminals", p.CSRF(t), form("name", "", "mid", m.MIDs[0].Id.String(), "hsn", "no spaces")).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "name", "1 to 100").ErrorBeside(t, "hsn", "letters, digits and hyphens")
	admin.Post("/portal/terminals", p.CSRF(t), form("name", "Till", "mid", "", "hsn", "SIM-OK-till")).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "mid", "Choose the MID")
	admin.Post("/portal/terminals", p.CSRF(t), form("name", "Till", "mid", m.MIDs[0].Id.String(), "hsn", front.HSN)).
		Want(t, http.StatusUnprocessableEntity).ErrorBeside(t, "hsn", "registered already")
	other := apitest.NewMerchant(t, env)
	admin.Post("/portal/terminals", p.CSRF(t), form("name", "Till", "mid", other.MIDs[0].Id.String(), "hsn", "SIM-OK-till")).
		Want(t, http.StatusUnprocessableEntity).ErrorBeside(t, "mid", "No MID")
	admin.Post("/portal/terminals", "", form("name", "Till", "mid", m.MIDs[0].Id.String(), "hsn", "SIM-OK-till")).Want(t, http.StatusForbidden)
	if ts, _ := env.App.Terminals.List(t.Context(), &org); len(ts) != 2 {
		t.Fatalf("refused forms registered terminals: %d", len(ts))
	}
	admin.Post("/portal/terminals", p.CSRF(t), form("name", "Till", "mid", m.MIDs[0].Id.String(), "hsn", "SIM-OK-till")).
		WantRedirect(t, "/portal/terminals?done=added")
	admin.Get("/portal/terminals?done=added").Has(t, "The terminal was added.", "Till", "SIM-OK-till")
	if got := auditOf(t, env, org, "terminal added"); len(got) != 1 || !strings.Contains(got[0], "SIM-OK-till") {
		t.Errorf("audit entries of the addition: %q", got)
	}

	// Rename and remove; another organization's terminal is a 404.
	path := "/portal/terminals/" + front.ID.String()
	p = admin.Get(path).Want(t, http.StatusOK).Has(t, `value="Front counter"`)
	admin.Post(path, p.CSRF(t), form("name", strings.Repeat("n", 101))).Want(t, http.StatusBadRequest).ErrorBeside(t, "name", "1 to 100")
	admin.Post(path, p.CSRF(t), form("name", "Counter 1")).WantRedirect(t, path+"?done=renamed")
	admin.Get(path+"?done=renamed").Has(t, "The terminal was renamed.", `value="Counter 1"`)
	if got := auditOf(t, env, org, "terminal renamed"); len(got) != 1 {
		t.Errorf("audit entries of the rename: %q", got)
	}
	theirs := addTerminal(t, env, other.MIDs[0].Id, processor.SimTerminalOK, "Theirs")
	admin.Get("/portal/terminals/"+theirs.ID.String()).Want(t, http.StatusNotFound)
	admin.Post("/portal/terminals/"+theirs.ID.String(), p.CSRF(t), form("name", "Mine")).Want(t, http.StatusNotFound)
	admin.Post("/portal/terminals/"+theirs.ID.String()+"/remove", p.CSRF(t), nil).Want(t, http.StatusNotFound)
	admin.Post(path+"/remove", "", nil).Want(t, http.StatusForbidden)
	admin.Post(path+"/remove", p.CSRF(t), nil).WantRedirect(t, "/portal/terminals?done=removed")
	if body := admin.Get("/portal/terminals?done=removed").Has(t, "The terminal was removed.").Body; strings.Contains(body, "Counter 1") {
		t.Error("a removed terminal is listed")
	}
	if got := auditOf(t, env, org, "terminal removed"); len(got) != 1 || !strings.Contains(got[0], "Counter 1") {
		t.Errorf("audit entries of the removal: %q", got)
	}
	admin.Post(path+"/remove", p.CSRF(t), nil).Want(t, http.StatusNotFound)
	if got, err := env.App.Terminals.Get(t.Context(), uuid.MustParse(other.Org), theirs.ID); err != nil || got.Name != "Theirs" {
		t.Errorf("another organization's terminal after the tries: %+v %v", got, err)
	}
}

func TestCollectAtATerminal(t *testing.T) {
	t.Parallel()
	env := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	ok := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalOK, "Front counter")
	chip := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalChip, "Chip reader")
	decline := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalDecline, "Declines")
	slow := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalSlow, "Slow")
	offline := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalOffline, "Unplugged")
	c, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView, auth.PaymentsCreate)
	inv := m.MustCreate(t, m.Body("TERM-1", "100.00"))
	invPath := "/portal/invoices/" + inv.Id.String()

	c.Get(invPath).Has(t, `href="`+invPath+`/terminal">Collect at a terminal`)
	p := c.Get(invPath+"/terminal").Want(t, http.StatusOK).Has(t, `value="100.00"`, "Front counter", "Chip reader", "Slow")
	if strings.Contains(p.Body, "Unplugged") {
		t.Error("an offline terminal is offered")
	}

	// Refusals: beside their fields, nothing asked.
	key := formKey(t, p)
	send := func(terminalID uuid.UUID, amount string) portaltest.Page {
		return c.Post(invPath+"/terminal", p.CSRF(t), form("idempotencyKey", key, "terminalId", terminalID.String(), "amount", amount))
	}
	send(ok.ID, "100.01").Want(t, http.StatusUnprocessableEntity).ErrorBeside(t, "amount", "balance")
	send(ok.ID, "ten").Want(t, http.StatusBadRequest).ErrorBeside(t, "amount", "dollars and cents")
	send(offline.ID, "10").Want(t, http.StatusUnprocessableEntity).ErrorBeside(t, "terminalId", "not answered")
	other := apitest.NewMerchant(t, env)
	theirs := addTerminal(t, env, other.MIDs[0].Id, processor.SimTerminalOK, "Theirs")
	send(theirs.ID, "10").Want(t, http.StatusUnprocessableEntity).ErrorBeside(t, "terminalId", "not a terminal of this organization")
	c.Post(invPath+"/terminal", "", form("idempotencyKey", key, "terminalId", ok.ID.String(), "amount", "10")).Want(t, http.StatusForbidden)
	theirInv := other.MustCreate(t, other.Body("THEIRS-1", "10.00"))
	c.Get("/portal/invoices/"+theirInv.Id.String()+"/terminal").Want(t, http.StatusNotFound)
	c.Post("/portal/invoices/"+theirInv.Id.String()+"/terminal", p.CSRF(t), form("idempotencyKey", key, "terminalId", ok.ID.String(), "amount", "10")).
		Want(t, http.StatusNotFound)
	viewer, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	viewer.Get(invPath+"/terminal").Want(t, http.StatusForbidden)
	viewer.Post(invPath+"/terminal", p.CSRF(t), form("idempotencyKey", key, "terminalId", ok.ID.String(), "amount", "10")).Want(t, http.StatusForbidden)
	if n := pendingOf(t, env, org); n != 0 {
		t.Fatalf("refused forms asked %d payments", n)
	}

	// Approved, contactless: sent twice, asked once; the waiting page
	// refreshes itself with Cancel, then the receipt.
	resp := send(ok.ID, "40").Want(t, http.StatusSeeOther)
	waiting := resp.Header.Get("Location")
	send(ok.ID, "40").WantRedirect(t, waiting)
	if n := pendingOf(t, env, org); n != 1 {
		t.Fatalf("the form sent twice asked %d payments", n)
	}
	w := c.Get(waiting).Want(t, http.StatusOK).Has(t, "Waiting for the card", "$40.00", "Front counter", "Cancel the payment", "every 2 seconds")
	if got := w.Header.Get("Refresh"); got != "2" {
		t.Errorf("the waiting page's Refresh header: %q", got)
	}
	viewer.Get(waiting).Want(t, http.StatusOK).Has(t, "Waiting for the card")
	if strings.Contains(viewer.Get(waiting).Body, "Cancel the payment") {
		t.Error("a member without payments.create is offered Cancel")
	}
	// A second payment on the busy terminal.
	p2 := c.Get(invPath + "/terminal")
	if strings.Contains(p2.Body, "Front counter") {
		t.Error("a busy terminal is offered")
	}
	c.Post(invPath+"/terminal", p2.CSRF(t), form("idempotencyKey", formKey(t, p2), "terminalId", ok.ID.String(), "amount", "10")).
		Want(t, http.StatusConflict).ErrorBeside(t, "terminalId", "another payment is waiting")
	workTerminals(t, env)
	done := c.Get(waiting).Want(t, http.StatusOK).Has(t, "Payment approved", "Receipt", "$40.00", "Visa", "ending 1111", "Contactless", "The card payment")
	if done.Header.Get("Refresh") != "" || strings.Contains(done.Body, "Cancel the payment") {
		t.Error("the outcome page still refreshes or offers Cancel")
	}
	if read, raw := m.Read(t, inv.Id); read.Status != models.InvoiceStatusPartPaid || read.AmountPaid.Text('f') != "40.00" {
		t.Fatalf("after the approval: %s", raw)
	}

	// Chip: the default amount is the balance left; the receipt names
	// the application and its AID.
	c.Get(invPath+"/terminal").Has(t, `value="60.00"`)
	at := collect(t, c, inv.Id, chip.ID, "20.00")
	workTerminals(t, env)
	c.Get(at).Has(t, "Payment approved", "$20.00", "Chip", "VISA CREDIT", "A0000000031010")

	// Declined, with its reason.
	at = collect(t, c, inv.Id, decline.ID, "10.00")
	workTerminals(t, env)
	c.Get(at).Has(t, "Payment declined", "Insufficient funds", "Nothing was charged")

	// Cancelled while waiting; then no Cancel again. A terminal a
	// payment waits on is not removed meanwhile.
	at = collect(t, c, inv.Id, slow.ID, "10.00")
	w = c.Get(at).Has(t, "Waiting for the card")
	admin, _ := portaltest.SignedIn(t, env, org, "Admin", auth.AccountsView)
	busy := admin.Get("/portal/terminals/"+slow.ID.String()).Has(t, "Busy: a payment waits on it")
	admin.Post("/portal/terminals/"+slow.ID.String()+"/remove", busy.CSRF(t), nil).Want(t, http.StatusConflict).Has(t, "A payment is waiting on this terminal")
	if _, err := env.App.Terminals.Get(t.Context(), org, slow.ID); err != nil {
		t.Fatalf("a busy terminal was removed: %v", err)
	}
	c.Post(at+"/cancel", "", nil).Want(t, http.StatusForbidden)
	viewer.Post(at+"/cancel", w.CSRF(t), nil).Want(t, http.StatusForbidden)
	c.Post(at+"/cancel", w.CSRF(t), nil).WantRedirect(t, at)
	c.Get(at).Has(t, "Payment cancelled", "before a card was taken")
	c.Post(at+"/cancel", w.CSRF(t), nil).Want(t, http.StatusUnprocessableEntity)

	// Timed out: the slow terminal never answers.
	env.App.Terminals.Timeout = 50 * time.Millisecond
	at = collect(t, c, inv.Id, slow.ID, "10.00")
	workTerminals(t, env)
	c.Get(at).Has(t, "Payment timed out", "took no card in time")

	// Another organization's payment is a 404.
	otherC, _ := portaltest.SignedIn(t, env, uuid.MustParse(other.Org), "Member", auth.PaymentsView, auth.PaymentsCreate)
	otherC.Get(at).Want(t, http.StatusNotFound)
	otherP := otherC.Get("/portal/")
	otherC.Post(at+"/cancel", otherP.CSRF(t), nil).Want(t, http.StatusNotFound)
	c.Get("/portal/terminal-payments/not-an-id").Want(t, http.StatusNotFound)
	if read, raw := m.Read(t, inv.Id); read.AmountPaid.Text('f') != "60.00" {
		t.Fatalf("after every outcome: %s", raw)
	}
}

// pendingOf counts the organization's terminal payments.
func pendingOf(t *testing.T, env *apitest.Env, org uuid.UUID) int {
	t.Helper()
	ps, _, err := env.App.Terminals.Payments(t.Context(), org, terminal.Filter{}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	return len(ps)
}

// A terminal payment that fails is told, in the transaction that settles
// it, to each member who chose "a terminal payment fails" (one email),
// and to nobody else: not to a member who did not choose it, nor to the
// Owner (off by default).
func TestTerminalFailedTellsWhoChoseIt(t *testing.T) {
	t.Parallel()
	env := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	ctx := t.Context()
	chooser := portaltest.NewMember(t, env, org, "Member", auth.PaymentsView)
	bystander := portaltest.NewMember(t, env, org, "Member", auth.PaymentsView)
	owner := portaltest.NewMember(t, env, org, "Owner")
	ms, err := env.App.People.Membership(ctx, chooser.MembershipID)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.App.People.SetNotificationChoices(ctx, people.Actor{Membership: &ms}, []string{people.NotifyTerminalFailed}); err != nil {
		t.Fatal(err)
	}
	tm := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalOK, "Counter")
	inv := m.MustCreate(t, m.Body("TERM-F", "9.00"))
	resp := env.Do(apitest.Request{Method: "POST", Path: "/terminal-payments", Token: m.Token,
		Body: map[string]any{"terminalId": tm.ID, "invoiceId": inv.Id, "amount": nil}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /terminal-payments: %d %s", resp.StatusCode, resp.Body)
	}
	var p models.TerminalPayment
	resp.JSON(t, &p)
	// Paid in cash meanwhile: the terminal's approval is voided, the
	// payment failed.
	if resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/payments", Token: m.Token,
		Body: map[string]any{"amount": "9.00", "method": "cash"}}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("cash: %d %s", resp.StatusCode, resp.Body)
	}
	workTerminals(t, env)
	var status string
	if err := env.App.DB.Get(&status, `SELECT status FROM terminal_payments WHERE id = $1`, p.Id); err != nil || status != terminal.Failed {
		t.Fatalf("terminal payment %s, %v; want failed", status, err)
	}
	for _, c := range []struct {
		who  portaltest.Member
		want int
	}{{chooser, 1}, {bystander, 0}, {owner, 0}} {
		var n int
		if err := env.App.DB.Get(&n, `SELECT count(*) FROM outbox WHERE organization_id = $1 AND recipient = $2 AND notice IS NOT NULL`,
			org, c.who.Email); err != nil {
			t.Fatal(err)
		}
		if n != c.want {
			t.Errorf("%s was sent %d notices, want %d", c.who.Email, n, c.want)
		}
	}
}
