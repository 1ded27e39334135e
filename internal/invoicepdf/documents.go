package invoicepdf

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/apd/v3"
	"golang.org/x/sync/singleflight"

	"github.com/payreq/payreq/internal/invoice"
)

// Documents keeps the invoice documents drawn lately, each under the
// version of the invoice it shows: a digest of everything drawing reads
// (the invoice as read, its lines, payments and biller, and the link). An
// unchanged invoice is drawn once however often it is asked for; any
// change that could show makes a new version, drawn on its next request.
// Requests for a version being drawn wait for that drawing rather than
// start their own.
//
// The documents are kept in this instance's memory, the least recently
// used leaving first once they hold more than their bound: each instance
// draws a version at most once, which is what bounds the CPU an anonymous
// holder of a pay link can take, without storing megabytes of PDF in the
// shared database for every invoice ever opened; and a new release, whose
// drawing may differ, starts empty.
type Documents struct {
	// Logos reads a business's logo by its hash (directory.Store.LogoPNG),
	// drawn above its name; nil draws none.
	Logos func(ctx context.Context, sha256 string) ([]byte, error)

	max    int // bytes
	flight singleflight.Group
	draws  atomic.Int64

	mu    sync.Mutex
	size  int
	order *list.List // of *kept, most recently used first
	kept  map[[sha256.Size]byte]*list.Element
}

type kept struct {
	version [sha256.Size]byte
	doc     []byte
}

// NewDocuments keeps documents up to maxBytes in all.
func NewDocuments(maxBytes int) *Documents {
	return &Documents{max: maxBytes, order: list.New(), kept: map[[sha256.Size]byte]*list.Element{}}
}

// Invoice is the invoice's document (as Invoice draws it), drawn unless
// this version of it was drawn already.
func (d *Documents) Invoice(ctx context.Context, inv invoice.Invoice, link string) ([]byte, error) {
	version, err := versionOf(inv, link)
	if err != nil {
		return nil, err
	}
	if doc, ok := d.get(version); ok {
		return doc, nil
	}
	v, err, _ := d.flight.Do(string(version[:]), func() (any, error) {
		if doc, ok := d.get(version); ok {
			return doc, nil
		}
		d.draws.Add(1)
		inv, err := d.withLogo(ctx, inv)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := Invoice(ctx, &buf, inv, link); err != nil {
			return nil, err
		}
		d.put(version, buf.Bytes())
		return buf.Bytes(), nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// Receipt is the receipt of payment p toward inv (as Receipt draws it),
// drawn anew: receipts are asked for seldom.
func (d *Documents) Receipt(ctx context.Context, inv invoice.Invoice, p invoice.Payment, balanceAfter apd.Decimal) ([]byte, error) {
	inv, err := d.withLogo(ctx, inv)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := Receipt(ctx, &buf, inv, p, balanceAfter); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// withLogo is inv with its business's logo's image read (a copy: the
// caller's invoice is left as it was).
func (d *Documents) withLogo(ctx context.Context, inv invoice.Invoice) (invoice.Invoice, error) {
	l := inv.Biller.Branding.Logo
	if l == nil || len(l.PNG) > 0 || d.Logos == nil {
		return inv, nil
	}
	png, err := d.Logos(ctx, l.SHA256)
	if err != nil {
		return inv, fmt.Errorf("invoicepdf: unable to read the logo: %w", err)
	}
	logo := *l
	logo.PNG = png
	inv.Biller.Branding.Logo = &logo
	return inv, nil
}

// Draws is how many documents were drawn (the rest were kept ones).
func (d *Documents) Draws() int64 { return d.draws.Load() }

// versionOf is the digest of what an invoice's document shows.
func versionOf(inv invoice.Invoice, link string) ([sha256.Size]byte, error) {
	b, err := json.Marshal(struct {
		Invoice invoice.Invoice
		Link    string
	}{inv, link})
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("invoicepdf: unable to name the invoice's version: %w", err)
	}
	return sha256.Sum256(b), nil
}

func (d *Documents) get(version [sha256.Size]byte) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.kept[version]
	if !ok {
		return nil, false
	}
	d.order.MoveToFront(e)
	return e.Value.(*kept).doc, true
}

func (d *Documents) put(version [sha256.Size]byte, doc []byte) {
	if len(doc) > d.max {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.kept[version]; ok {
		return
	}
	d.kept[version] = d.order.PushFront(&kept{version: version, doc: doc})
	d.size += len(doc)
	for d.size > d.max {
		last := d.order.Back()
		k := last.Value.(*kept)
		d.order.Remove(last)
		delete(d.kept, k.version)
		d.size -= len(k.doc)
	}
}
