package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// CardPointe is a client of a CardPointe-style REST gateway
// (https://user:password@host/cardconnect/rest). It is safe for concurrent
// use once its fields are set.
type CardPointe struct {
	// AuthTimeout bounds an authorisation; Timeout every other call.
	AuthTimeout time.Duration
	Timeout     time.Duration
	// VoidAttempts and VoidBackoff govern voidByOrderId after an
	// authorisation whose answer was lost: the gateway may still be
	// processing it, so the void is tried more than once.
	VoidAttempts int
	VoidBackoff  time.Duration

	base     string // without credentials or trailing slash
	user     string
	password string
	http     *http.Client
}

var _ Processor = (*CardPointe)(nil)

// NewCardPointe returns a client for the gateway at rawURL, whose userinfo
// holds the HTTP Basic credentials. A nil httpClient means a default one;
// the client's deadlines come from AuthTimeout and Timeout.
func NewCardPointe(rawURL string, httpClient *http.Client) (*CardPointe, error) {
	// The URL holds a password: errors name none of it.
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("cardpointe: the processor URL does not parse")
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("cardpointe: the processor URL must be http(s)://user:password@host/path")
	}
	if u.User == nil || u.User.Username() == "" {
		return nil, errors.New("cardpointe: the processor URL has no user:password")
	}
	password, _ := u.User.Password()
	user := u.User.Username()
	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	// A copy that follows no redirect: a redirected request would carry the
	// card number, the security code and the gateway's password to wherever
	// the answer points. A redirect is an answer like any other non-2xx.
	client := http.Client{}
	if httpClient != nil {
		client = *httpClient
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &CardPointe{
		AuthTimeout:  15 * time.Second,
		Timeout:      10 * time.Second,
		VoidAttempts: 3,
		VoidBackoff:  time.Second,
		base:         strings.TrimRight(u.String(), "/"),
		user:         user,
		password:     password,
		http:         &client,
	}, nil
}

// String names the gateway without its credentials.
func (c *CardPointe) String() string { return "cardpointe " + c.base }

type authRequest struct {
	MerchID  string `json:"merchid"`
	Account  string `json:"account"`
	Expiry   string `json:"expiry"`
	CVV2     string `json:"cvv2,omitempty"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	OrderID  string `json:"orderid"`
	Name     string `json:"name,omitempty"`
	EcomInd  string `json:"ecomind"`
	Capture  string `json:"capture"`
	Profile  string `json:"profile,omitempty"`
	// A stored credential's: cof "M" (merchant-initiated) and
	// cofscheduled "Y" (on a schedule), with ecomind "R" (recurring).
	COF          string     `json:"cof,omitempty"`
	COFScheduled string     `json:"cofscheduled,omitempty"`
	TaxAmnt      string     `json:"taxamnt,omitempty"`
	Items        []authItem `json:"items,omitempty"`
}

type authItem struct {
	LineNo        string `json:"lineno"`
	Material      string `json:"material"`
	Description   string `json:"description"`
	UPC           string `json:"upc"`
	Quantity      string `json:"quantity"`
	UOM           string `json:"uom"`
	UnitCost      string `json:"unitcost"`
	NetAmnt       string `json:"netamnt"`
	TaxAmnt       string `json:"taxamnt"`
	CommodityCode string `json:"commoditycode"`
}

// gatewayResponse holds the fields read from any answer. The gateway echoes
// a masked or tokenised account, which is not read.
type gatewayResponse struct {
	RespStat  string `json:"respstat"`
	RespCode  string `json:"respcode"`
	RespText  string `json:"resptext"`
	RetRef    string `json:"retref"`
	ProfileID string `json:"profileid"`
	AcctID    string `json:"acctid"`
	// From an inquiry: whether a sale may still be voided, and its
	// settlement state ("Voided" once voided).
	Voidable string `json:"voidable"`
	SetlStat string `json:"setlstat"`
}

// authBody is the PUT /auth of a charge: a card typed by the customer
// (ecomind "E"), or a stored card charged by the merchant on a schedule
// (its profile; cof "M", cofscheduled "Y", ecomind "R").
func authBody(ch Charge) authRequest {
	body := authRequest{
		MerchID:  ch.MerchantID,
		Account:  ch.Card.Number,
		Expiry:   ch.Card.Expiry,
		CVV2:     ch.Card.CVV,
		Amount:   money(&ch.Amount),
		Currency: "USD",
		OrderID:  ch.OrderID,
		Name:     ch.Card.Name,
		EcomInd:  "E",
		Capture:  "Y",
	}
	if ch.SaveProfile {
		body.Profile = "Y"
	}
	if ch.Items != nil {
		body.TaxAmnt = money(&ch.TaxAmount)
	}
	for i, it := range ch.Items {
		body.Items = append(body.Items, authItem{
			LineNo:        fmt.Sprint(i + 1),
			Material:      it.UPC,
			Description:   it.Description,
			UPC:           it.UPC,
			Quantity:      it.Quantity.Text('f'),
			UOM:           it.UOM,
			UnitCost:      it.UnitCost.Text('f'),
			NetAmnt:       money(&it.LineTotal),
			TaxAmnt:       money(&it.TaxAmount),
			CommodityCode: it.CommodityCode,
		})
	}

	if st := ch.Stored; st != nil {
		body.Account, body.Expiry, body.CVV2 = "", "", ""
		body.Profile = st.ProfileID + "/" + st.AccountID
		body.EcomInd, body.COF, body.COFScheduled = "R", "M", "Y"
	}
	return body
}

// AuthorizeCapture charges the card with PUT /auth. When the answer is lost
// or is not an answer about the card, the order is voided by its id before
// the error is returned, so the customer is not left charged.
func (c *CardPointe) AuthorizeCapture(ctx context.Context, ch Charge) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("cardpointe: authorize order %s: %w: %w", ch.OrderID, ErrUnavailable, err)
	}
	body := authBody(ch)
	actx, cancel := context.WithTimeout(ctx, c.AuthTimeout)
	defer cancel()
	resp, err := c.do(actx, http.MethodPut, "/auth", body)
	brand, four := ch.shown()
	if err == nil {
		switch {
		case resp.RespStat == "A" && resp.RetRef != "":
			return Result{
				Approved:  true,
				RetRef:    resp.RetRef,
				CardBrand: brand,
				LastFour:  four,
				ProfileID: resp.ProfileID,
				AccountID: resp.AcctID,
			}, nil
		case resp.RespStat == "C":
			reason := strings.TrimSpace(strings.ReplaceAll(resp.RespText, ch.Card.Number, ""))
			if reason == "" {
				reason = "Card declined"
			}
			return Result{
				DeclineReason: reason,
				CardBrand:     brand,
				LastFour:      four,
			}, nil
		default: // "B" (retry), an approval without a reference, or nonsense
			err = fmt.Errorf("%w: respstat %q respcode %q retref %q", ErrProcessorError, resp.RespStat, resp.RespCode, resp.RetRef)
		}
	}
	// Whatever went wrong, the gateway may have charged the card.
	if verr := c.voidByOrderID(ctx, ch.MerchantID, ch.OrderID); verr != nil {
		return Result{}, fmt.Errorf("cardpointe: authorize order %s: %w: %w: %w (void: %w)", ch.OrderID, ErrUnavailable, ErrUnsettled, err, verr)
	}
	return Result{}, fmt.Errorf("cardpointe: authorize order %s: %w: %w (voided)", ch.OrderID, ErrUnavailable, err)
}

// Void cancels the order's charge with PUT /voidByOrderId. An order the
// gateway does not know is not an error.
func (c *CardPointe) Void(ctx context.Context, merchantID, orderID string) error {
	if err := c.voidByOrderID(ctx, merchantID, orderID); err != nil {
		return fmt.Errorf("cardpointe: void order %s: %w: %w", orderID, ErrUnavailable, err)
	}
	return nil
}

// voidByOrderID tries up to VoidAttempts times, independently of ctx's
// cancellation (it runs when ctx has just timed out), until the gateway
// voids the order. If every answer is "not found", there was no charge.
func (c *CardPointe) voidByOrderID(ctx context.Context, merchantID, orderID string) error {
	ctx = context.WithoutCancel(ctx)
	body := map[string]string{"merchid": merchantID, "orderid": orderID}
	var lastErr error
	notFound := false
	for attempt := range max(c.VoidAttempts, 1) {
		if attempt > 0 {
			time.Sleep(c.VoidBackoff)
		}
		vctx, cancel := context.WithTimeout(ctx, c.Timeout)
		resp, err := c.do(vctx, http.MethodPut, "/voidByOrderId", body)
		cancel()
		switch {
		case err != nil:
			lastErr = err
		case resp.RespStat == "A":
			return nil
		case isNotFound(resp):
			notFound = true // perhaps not yet recorded: ask again
		default:
			return fmt.Errorf("void refused: respstat %q respcode %q: %s", resp.RespStat, resp.RespCode, resp.RespText)
		}
	}
	if notFound {
		return nil
	}
	return lastErr
}

// Refund voids the sale with PUT /void when the whole of it is refunded
// and the gateway says it may still be voided (GET /inquire), and refunds
// otherwise with PUT /refund, by the sale's retref and with the refund's
// order id. An answer that never came is ErrUnsettled: InquireRefund tells.
func (c *CardPointe) Refund(ctx context.Context, r Refund) (RefundResult, error) {
	if err := ctx.Err(); err != nil {
		return RefundResult{}, fmt.Errorf("cardpointe: refund order %s: %w: %w", r.OrderID, ErrUnavailable, err)
	}
	path, body := "/refund", map[string]string{"merchid": r.MerchantID, "retref": r.SaleRetRef, "amount": money(&r.Amount), "orderid": r.OrderID}
	if r.Whole {
		ictx, cancel := context.WithTimeout(ctx, c.Timeout)
		sale, err := c.do(ictx, http.MethodGet, "/inquire/"+url.PathEscape(r.SaleRetRef)+"/"+url.PathEscape(r.MerchantID), nil)
		cancel()
		if err != nil {
			// Nothing was asked of the card yet.
			return RefundResult{}, fmt.Errorf("cardpointe: refund order %s: inquire sale: %w: %w", r.OrderID, ErrUnavailable, err)
		}
		if sale.Voidable == "Y" {
			path, body = "/void", map[string]string{"merchid": r.MerchantID, "retref": r.SaleRetRef}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, c.AuthTimeout)
	defer cancel()
	resp, err := c.do(rctx, http.MethodPut, path, body)
	switch {
	case errors.Is(err, ErrProcessorError):
		return RefundResult{}, fmt.Errorf("cardpointe: refund order %s: %w: %w", r.OrderID, ErrUnavailable, err)
	case err != nil:
		return RefundResult{}, fmt.Errorf("cardpointe: refund order %s: %w: %w: %w", r.OrderID, ErrUnavailable, ErrUnsettled, err)
	case resp.RespStat == "A" && path == "/void":
		return RefundResult{Approved: true, RetRef: r.SaleRetRef}, nil
	case resp.RespStat == "A" && resp.RetRef != "":
		return RefundResult{Approved: true, RetRef: resp.RetRef}, nil
	case resp.RespStat == "C":
		reason := strings.TrimSpace(resp.RespText)
		if reason == "" {
			reason = "Refund declined"
		}
		return RefundResult{DeclineReason: reason}, nil
	}
	return RefundResult{}, fmt.Errorf("cardpointe: refund order %s: %w: %w: respstat %q respcode %q", r.OrderID, ErrUnavailable,
		ErrProcessorError, resp.RespStat, resp.RespCode)
}

// InquireRefund looks for the refund by its order id
// (GET /inquireByOrderid), then, for a whole refund, for a void of the
// sale (GET /inquire by the sale's retref: setlstat "Voided").
func (c *CardPointe) InquireRefund(ctx context.Context, r Refund) (RefundResult, bool, error) {
	ictx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	resp, err := c.do(ictx, http.MethodGet, "/inquireByOrderid/"+url.PathEscape(r.OrderID)+"/"+url.PathEscape(r.MerchantID), nil)
	switch {
	case err != nil:
		return RefundResult{}, false, fmt.Errorf("cardpointe: inquire refund %s: %w: %w", r.OrderID, ErrUnavailable, err)
	case resp.RespStat == "A" && resp.RetRef != "":
		return RefundResult{Approved: true, RetRef: resp.RetRef}, true, nil
	case resp.RespStat == "C" && !isNotFound(resp):
		return RefundResult{DeclineReason: strings.TrimSpace(resp.RespText)}, true, nil
	case !r.Whole:
		return RefundResult{}, false, nil
	}
	sale, err := c.do(ictx, http.MethodGet, "/inquire/"+url.PathEscape(r.SaleRetRef)+"/"+url.PathEscape(r.MerchantID), nil)
	if err != nil {
		return RefundResult{}, false, fmt.Errorf("cardpointe: inquire refund %s: sale: %w: %w", r.OrderID, ErrUnavailable, err)
	}
	if sale.SetlStat == "Voided" {
		return RefundResult{Approved: true, RetRef: r.SaleRetRef}, true, nil
	}
	return RefundResult{}, false, nil
}

func isNotFound(r gatewayResponse) bool {
	return r.RespStat == "C" && (r.RespCode == "29" || strings.Contains(strings.ToLower(r.RespText), "not found"))
}

// DeleteProfile removes a stored card with
// DELETE /profile/{profileid}/{acctid}/{merchid}.
func (c *CardPointe) DeleteProfile(ctx context.Context, merchantID, profileID, accountID string) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	path := "/profile/" + url.PathEscape(profileID) + "/" + url.PathEscape(accountID) + "/" + url.PathEscape(merchantID)
	resp, err := c.do(ctx, http.MethodDelete, path, nil)
	if err == nil && resp.RespStat == "C" {
		err = fmt.Errorf("respstat %q respcode %q: %s", resp.RespStat, resp.RespCode, resp.RespText)
	}
	if err != nil {
		return fmt.Errorf("cardpointe: delete profile %s: %w: %w", profileID, ErrUnavailable, err)
	}
	return nil
}

// do sends one request and decodes the JSON answer. Its errors never
// contain the request body (which may hold a card number).
func (c *CardPointe) do(ctx context.Context, method, path string, body any) (gatewayResponse, error) {
	var out gatewayResponse
	err := c.call(ctx, method, path, body, &out)
	return out, err
}

// call sends one request and decodes the JSON answer into out.
func (c *CardPointe) call(ctx context.Context, method, path string, body any, out any) error {
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return errors.New("encode request")
		}
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, reader)
	if err != nil {
		return fmt.Errorf("build %s %s request", method, path)
	}
	req.SetBasicAuth(c.user, c.password)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, transportError(err))
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, transportError(err))
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("%s %s: %w: HTTP %d", method, path, ErrProcessorError, res.StatusCode)
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: %w: answer is not JSON of the expected shape", method, path, ErrProcessorError)
		}
	}
	return nil
}

// transportError keeps the cause of a failed exchange but not the request
// URL, which url.Error would repeat.
func transportError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// money formats an amount with exactly two decimals, rounding half up.
func money(d *apd.Decimal) string {
	var out apd.Decimal
	ctx := apd.BaseContext.WithPrecision(34)
	ctx.Rounding = apd.RoundHalfUp
	if _, err := ctx.Quantize(&out, d, -2); err != nil {
		return d.Text('f')
	}
	return out.Text('f')
}

// fundingReport is the answer of GET /funding: the fundings made to the
// merchant on a day and the transactions each holds. Ids and amounts come
// as numbers or as strings of digits; json.Number takes both.
type fundingReport struct {
	Fundings []struct {
		FundingID    json.Number `json:"fundingid"`
		FundingDate  string      `json:"fundingdate"` // YYYY-MM-DD
		TotalFunding json.Number `json:"totalfunding"`
		NetSales     json.Number `json:"netsales"`
		Fee          json.Number `json:"fee"`
	} `json:"fundings"`
	Txns []struct {
		FundingID json.Number `json:"fundingid"`
		RetRef    string      `json:"retref"`
		Amount    json.Number `json:"amount"`
		Type      string      `json:"type"`
	} `json:"txns"`
}

// Settle reads the funding report of the batch's day
// (GET /funding?merchid=&date=MMDD): each funding, with the retrefs of its
// transactions and its fee as the report states it (a fee reported as a
// negative amount, a debit, is the same fee), expected on its funding date.
func (c *CardPointe) Settle(ctx context.Context, b Batch) ([]Funding, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	q := url.Values{"merchid": {b.MerchantID}, "date": {b.Date.Format("0102")}}
	var report fundingReport
	if err := c.call(ctx, http.MethodGet, "/funding?"+q.Encode(), nil, &report); err != nil {
		return nil, fmt.Errorf("cardpointe: funding report %s %s: %w: %w", b.MerchantID, b.Date.Format(time.DateOnly), ErrUnavailable, err)
	}
	var out []Funding
	for _, f := range report.Fundings {
		funding := Funding{Ref: f.FundingID.String()}
		at, err := time.Parse(time.DateOnly, f.FundingDate)
		if err != nil || funding.Ref == "" {
			return nil, fmt.Errorf("cardpointe: funding report %s: %w: %w: funding %q dated %q", b.MerchantID,
				ErrUnavailable, ErrProcessorError, funding.Ref, f.FundingDate)
		}
		funding.ExpectedAt = at
		if f.Fee != "" {
			if _, _, err := funding.Fees.SetString(f.Fee.String()); err != nil {
				return nil, fmt.Errorf("cardpointe: funding report %s: %w: %w: fee %q", b.MerchantID, ErrUnavailable, ErrProcessorError, f.Fee)
			}
			funding.Fees.Abs(&funding.Fees)
		}
		for _, t := range report.Txns {
			if t.FundingID == f.FundingID && t.RetRef != "" {
				funding.RetRefs = append(funding.RetRefs, t.RetRef)
			}
		}
		out = append(out, funding)
	}
	return out, nil
}
