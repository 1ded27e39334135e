package payment

import (
	"testing"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/invoice"
)

func dec(s string) apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic(err)
	}
	return *d
}

func ptr(s string) *string { return &s }

func TestLevel3Items(t *testing.T) {
	full := func() invoice.Line {
		return invoice.Line{Description: "Beans", Quantity: dec("3.0000"), UnitCost: dec("0.0149"),
			UOM: ptr("LB"), CommodityCode: ptr("0901"), UPC: ptr("012345678905")}
	}
	items := Level3Items([]invoice.Line{full(), full()})
	if len(items) != 2 || items[0].LineTotal.Text('f') != "0.04" || items[0].Quantity.Text('f') != "3" ||
		items[0].UnitCost.Text('f') != "0.0149" || items[1].UPC != "012345678905" {
		t.Fatalf("items: %+v", items)
	}
	for name, edit := range map[string]func(*invoice.Line){
		"no uom":            func(l *invoice.Line) { l.UOM = nil },
		"no commodity code": func(l *invoice.Line) { l.CommodityCode = nil },
		"blank upc":         func(l *invoice.Line) { l.UPC = ptr("  ") },
	} {
		l := full()
		edit(&l)
		if items := Level3Items([]invoice.Line{full(), l}); items != nil {
			t.Errorf("%s: items sent", name)
		}
	}
	if Level3Items(nil) != nil || Level3Items([]invoice.Line{}) != nil {
		t.Errorf("items without lines")
	}
}

func TestBrandName(t *testing.T) {
	for in, want := range map[string]string{"visa": "Visa", "MASTERCARD": "Mastercard", "amex": "American Express",
		"discover": "Discover", "jcb": "JCB", "diners": "Diners Club", "unknown": "", "": "", "UnionPay": "UnionPay"} {
		if got := BrandName(in); got != want {
			t.Errorf("BrandName(%q) = %q, want %q", in, got, want)
		}
	}
}
