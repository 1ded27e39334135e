package paypage_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/processor"
)

// atProcessor is the simulator, telling each charge as it reaches the
// processor and counting those it has answered.
type atProcessor struct {
	processor.Processor
	reached  chan string // order ids
	answered atomic.Int32
}

func watchProcessor(p *atProcessor) func(processor.Processor) processor.Processor {
	p.reached = make(chan string, 64)
	return func(sim processor.Processor) processor.Processor {
		p.Processor = sim
		return p
	}
}

func (p *atProcessor) AuthorizeCapture(ctx context.Context, c processor.Charge) (processor.Result, error) {
	p.reached <- c.OrderID
	defer p.answered.Add(1)
	return p.Processor.AuthorizeCapture(ctx, c)
}

// waitReached waits for n charges to reach the processor; the test's own
// deadline stops a wait that would never end.
func (p *atProcessor) waitReached(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(time.Minute)
	for i := range n {
		select {
		case <-p.reached:
		case <-deadline:
			t.Fatalf("%d of %d charges reached the processor", i, n)
		}
	}
}

// A payment waiting for the card processor holds no database connection:
// with a pool of 4, eight pays with the slow card are at the processor at
// once, and the API answers meanwhile.
func TestSlowPaysLeaveTheAPIAnswering(t *testing.T) {
	at := &atProcessor{}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: watchProcessor(at), Configure: func(c *config.Config) {
		c.DBMaxOpenConns, c.DBMaxIdleConns = 4, 4
	}})
	m := apitest.NewMerchant(t, env)
	const pays = 8
	type form struct{ path, token string }
	forms := make([]form, pays)
	for i := range forms {
		path := apitest.PayPath(t, m.MustCreate(t, m.Body(fmt.Sprintf("SLOW-%d", i), "12.00")))
		forms[i] = form{path, apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))}
	}
	answers := make(chan apitest.Page, pays)
	for _, f := range forms {
		go func() {
			answers <- env.Post(t, f.path, f.token, apitest.Payment{Card: processor.TestCardSlow, Amount: "12.00"})
		}()
	}

	at.waitReached(t, pays)
	if n := at.answered.Load(); n != 0 {
		t.Fatalf("%d pays were answered before the eighth reached the processor: the others waited for a connection", n)
	}
	r := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: m.Token})
	apitest.Want(t, "GET /locations while eight pays wait for the processor", r.StatusCode, http.StatusOK)
	if n := at.answered.Load(); n != 0 {
		t.Errorf("GET /locations answered after %d of the pays: it waited for them", n)
	}
	for range pays {
		apitest.WantStatus(t, <-answers, http.StatusSeeOther)
	}
}

// Two customers pay the whole balance at once: the second is refused at
// once, before the processor is asked, while the first is still at the
// processor; the invoice is paid once.
func TestTwoPaysOfTheWholeBalanceAtOnce(t *testing.T) {
	at := &atProcessor{}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: watchProcessor(at)})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("BOTH-1", "50.00"))
	path := apitest.PayPath(t, inv)
	first := apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))
	second := apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))

	answered := make(chan apitest.Page, 1)
	go func() {
		answered <- env.Post(t, path, first, apitest.Payment{Card: processor.TestCardSlow, Amount: "50.00"})
	}()
	at.waitReached(t, 1)
	refused := env.Post(t, path, second, apitest.Payment{Card: apitest.CardApprove, Amount: "50.00"})
	apitest.WantStatus(t, refused, http.StatusUnprocessableEntity)
	if !strings.Contains(refused.Body, "nothing was charged") || !strings.Contains(refused.Body, "under way") {
		t.Errorf("the refusal does not say that another payment is under way and nothing was charged: %s", refused.Body)
	}
	if n := at.answered.Load(); n != 0 {
		t.Errorf("the second pay was answered after the first: it waited for it")
	}
	apitest.WantStatus(t, <-answered, http.StatusSeeOther)
	select {
	case id := <-at.reached:
		t.Errorf("the second pay reached the processor (order %s)", id)
	default:
	}
	got, raw := m.Read(t, inv.Id)
	apitest.Want(t, "payments", len(*got.Payments), 1)
	apitest.Want(t, "amountPaid", got.AmountPaid.Text('f'), "50.00")
	apitest.Want(t, "status", got.Status, "paid")
	if t.Failed() {
		t.Log(raw)
	}
}
