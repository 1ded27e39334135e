// Command create-invoice is an integrator's first program against payreq:
// it lists the merchant's MIDs, creates an invoice on the first one, records
// a check the customer paid part of it with, and reads it back.
//
//	PAYREQ_URL=http://127.0.0.1:8080 PAYREQ_KEY_ID=mk_… PAYREQ_SECRET=ms_… go run ./examples/create-invoice
//
// Without PAYREQ_KEY_ID and PAYREQ_SECRET it uses the demo merchant's key in
// .data/demo.json (PAYREQ_DEMO_FILE), which `make run` writes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"

	payreq "github.com/payreq/payreq/client"
	"github.com/payreq/payreq/gen/client"
)

func main() {
	s, err := settingsFromEnv()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = run(ctx, s, os.Stdout)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "create-invoice:", err)
		os.Exit(1)
	}
}

// settings say which server to use and with which API key.
type settings struct {
	URL, KeyID, Secret string
}

func settingsFromEnv() (settings, error) {
	s := settings{URL: os.Getenv("PAYREQ_URL"), KeyID: os.Getenv("PAYREQ_KEY_ID"), Secret: os.Getenv("PAYREQ_SECRET")}
	if s.URL == "" {
		s.URL = "http://127.0.0.1:8080"
	}
	if s.KeyID != "" && s.Secret != "" {
		return s, nil
	}
	file := os.Getenv("PAYREQ_DEMO_FILE")
	if file == "" {
		file = ".data/demo.json"
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return s, fmt.Errorf("set PAYREQ_KEY_ID and PAYREQ_SECRET, or run `make run` to write the demo keys: %w", err)
	}
	var demo struct {
		Merchant struct {
			KeyID  string `json:"keyId"`
			Secret string `json:"secret"`
		} `json:"merchant"`
	}
	if err := json.Unmarshal(raw, &demo); err != nil {
		return s, fmt.Errorf("reading %s: %w", file, err)
	}
	s.KeyID, s.Secret = demo.Merchant.KeyID, demo.Merchant.Secret
	return s, nil
}

// run creates an invoice on the key's first MID and prints it as read back.
func run(ctx context.Context, s settings, out io.Writer, opts ...payreq.Option) error {
	c, err := payreq.New(s.URL, s.KeyID, s.Secret, opts...)
	if err != nil {
		return err
	}

	accounts, err := c.ListAccountsWithResponse(ctx, nil)
	if err != nil {
		return fmt.Errorf("listing MIDs: %w", err)
	}
	if accounts.JSON200 == nil {
		return answerError("GET /accounts", accounts.StatusCode(), accounts.Body)
	}
	if len(*accounts.JSON200) == 0 {
		return errors.New("the key's organization has no MIDs")
	}
	mid := (*accounts.JSON200)[0]
	fmt.Fprintf(out, "MID %s (id %s)\n", mid.Mid, mid.Id)

	// Amounts are exact decimals, never floats: 2 × 45.50 + 1 × 12.30 = 103.30.
	lines := []client.InvoiceLineInput{
		{Description: "Chafing dish rental", Quantity: payreq.MustDecimal("2"), UnitCost: payreq.MustDecimal("45.50"),
			Uom: new("EA"), CommodityCode: new("5310"), Upc: new("036000291452")},
		{Description: "Delivery", Quantity: payreq.MustDecimal("1"), UnitCost: payreq.MustDecimal("12.30"),
			Uom: new("EA"), CommodityCode: nil, Upc: nil},
	}
	created, err := c.CreatePaymentRequestWithResponse(ctx, nil, client.CreatePaymentRequest{
		MerchantAccountId: mid.Id,
		InvoiceNumber:     "INV-" + time.Now().UTC().Format("20060102-150405.000"),
		Amount:            payreq.MustDecimal("103.30"),
		PoNumber:          new("PO-7781"),
		CustomerName:      new("Dana Whitfield"),
		CustomerCompany:   new("Whitfield Catering LLC"),
		CustomerEmail:     new("dana@example.com"),
		CustomerPhone:     new("+15125550148"),
		Delivery:          new(client.DeliveryEmail),
		Memo:              new("Thank you for your business."),
		DueDate:           &openapi_types.Date{Time: time.Now().AddDate(0, 0, 30)},
		Lines:             &lines,
		Send:              new(false), // true (or null) also sends the pay link to the customer now
	})
	if err != nil {
		return fmt.Errorf("creating the invoice: %w", err)
	}
	if created.JSON201 == nil {
		return answerError("POST /payment-requests", created.StatusCode(), created.Body)
	}
	fmt.Fprintf(out, "created invoice %s (id %s), pay link %s\n", created.JSON201.InvoiceNumber, created.JSON201.Id, deref(created.JSON201.Link))

	// A check for part of it came by mail: recorded as a payment made
	// outside the card (the client gives the request an Idempotency-Key,
	// so a retry never records it twice).
	recorded, err := c.RecordPaymentWithResponse(ctx, created.JSON201.Id, nil, client.RecordPaymentRequest{
		Amount: payreq.MustDecimal("50.00"), Method: client.RecordPaymentRequestMethodCheck, Reference: new("Check 1042"),
	})
	if err != nil {
		return fmt.Errorf("recording the check: %w", err)
	}
	if recorded.JSON201 == nil {
		return answerError("POST /payment-requests/{id}/payments", recorded.StatusCode(), recorded.Body)
	}
	fmt.Fprintf(out, "recorded a check of 50.00: status %s, balance %s\n", recorded.JSON201.Status, recorded.JSON201.Balance.String())

	got, err := c.GetPaymentRequestWithResponse(ctx, created.JSON201.Id)
	if err != nil {
		return fmt.Errorf("reading the invoice back: %w", err)
	}
	if got.JSON200 == nil {
		return answerError("GET /payment-requests/{id}", got.StatusCode(), got.Body)
	}
	fmt.Fprintf(out, "read back: status %s, amount %s, balance %s, %d lines\n",
		got.JSON200.Status, got.JSON200.Amount.String(), got.JSON200.Balance.String(), got.JSON200.Lines)
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(got.JSON200)
}

// answerError describes an answer other than the one expected; the body is
// a problem document whose title and detail say what to change.
func answerError(what string, status int, body []byte) error {
	var p client.Problem
	if json.Unmarshal(body, &p) == nil && p.Title != "" {
		if p.Errors != nil {
			return fmt.Errorf("%s: %d %s: %s %v", what, status, p.Title, p.Detail, *p.Errors)
		}
		return fmt.Errorf("%s: %d %s: %s", what, status, p.Title, p.Detail)
	}
	return fmt.Errorf("%s: %d %s", what, status, body)
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}
