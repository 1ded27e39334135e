package webhook

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/rule"
)

// Every attempt of a delivery is kept with its status code and error, not
// only the last: a 500, a 503, then a 204 are three attempts, listed for
// the event oldest first and for the endpoint newest first, a page at a
// time. A redelivery starts counting again and keeps the attempts before
// it. The endpoint's list leaves out events the reader may not read, and
// another organization's endpoint lists nothing.
func TestEveryAttemptKept(t *testing.T) {
	f := newFixture(t)
	w := f.worker(time.Minute, time.Minute, time.Minute)
	r := newReceiver(t, status(500))
	e := f.endpoint(t, r.URL+"/hook", "*")
	id := f.paid(t)
	ping, err := f.store.Ping(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	fanOut(t, w)
	deliverDue(t, w) // the paid event and the ping: 500 both
	r.set(status(503))
	f.clock.advance(2 * time.Minute)
	deliverDue(t, w)
	r.set(status(204))
	f.clock.advance(2 * time.Minute)
	deliverDue(t, w)

	type want struct {
		number int
		status string
		code   int
		err    string
	}
	check := func(what string, got []Attempt, wants []want) {
		t.Helper()
		if len(got) != len(wants) {
			t.Fatalf("%s: %d attempts, want %d: %+v", what, len(got), len(wants), got)
		}
		for i, w := range wants {
			a := got[i]
			if a.Number != w.number || a.Status != w.status || a.StatusCode == nil || *a.StatusCode != w.code || text(a.Error) != w.err ||
				a.EndpointID != e.ID || a.URL != e.URL {
				t.Errorf("%s, attempt %d: %d %s %v %q at %s; want %d %s %d %q", what, i, a.Number, a.Status, a.StatusCode, text(a.Error),
					a.URL, w.number, w.status, w.code, w.err)
			}
		}
	}
	attempts, err := f.store.EventAttempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	check("the event's", attempts, []want{{1, "pending", 500, "HTTP 500"}, {2, "pending", 503, "HTTP 503"}, {3, "delivered", 204, ""}})
	if !attempts[0].At.Before(attempts[1].At) || !attempts[1].At.Before(attempts[2].At) || attempts[2].EventType != event.InvoicePaid.Name {
		t.Errorf("attempts not in order, or of another type: %+v", attempts)
	}
	if d := f.delivery(t, id, e.ID); d.Attempts != 3 || d.Status != "delivered" {
		t.Errorf("the delivery: %d attempts, %s", d.Attempts, d.Status)
	}

	// Sent again: one more attempt, counted from 1, the three kept.
	f.clock.advance(time.Second)
	if err := f.store.Redeliver(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, id); err != nil {
		t.Fatal(err)
	}
	deliverDue(t, w)
	attempts, err = f.store.EventAttempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	check("the event's, redelivered", attempts, []want{{1, "pending", 500, "HTTP 500"}, {2, "pending", 503, "HTTP 503"},
		{3, "delivered", 204, ""}, {1, "delivered", 204, ""}})

	// The endpoint's, newest first, two a page: the redelivery, then the
	// ping's and the event's attempts.
	all := permissions(auth.KindMerchant)
	var listed []Attempt
	after := ""
	for pages := 0; ; pages++ {
		page, next, err := f.store.EndpointAttempts(context.Background(), f.org, all, e.ID, 2, after)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, page...)
		if next == "" || pages > 5 {
			break
		}
		after = next
	}
	if len(listed) != 7 || listed[0].EventID != id || listed[0].Number != 1 {
		t.Fatalf("the endpoint's attempts: %+v", listed)
	}
	for i := 1; i < len(listed); i++ {
		if listed[i].At.After(listed[i-1].At) {
			t.Errorf("attempt %d is newer than the one before it", i)
		}
	}
	// Without payments.view, only the ping's (webhook.ping is anyone's).
	pingOnly, _, err := f.store.EndpointAttempts(context.Background(), f.org, []string{auth.WebhooksManage}, e.ID, 25, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pingOnly) != 3 {
		t.Errorf("without payments.view: %d attempts, want the ping's 3", len(pingOnly))
	}
	for _, a := range pingOnly {
		if a.EventID != ping || a.EventType != event.WebhookPing.Name {
			t.Errorf("without payments.view, an attempt of %s %s", a.EventType, a.EventID)
		}
	}
	other, _, err := f.store.EndpointAttempts(context.Background(), uuid.Must(uuid.NewV7()), all, e.ID, 25, "")
	if err != nil || len(other) != 0 {
		t.Errorf("another organization's reading: %d attempts, %v", len(other), err)
	}
	if got := r.got(); len(got) != 7 {
		t.Errorf("the receiver got %d requests, want 7", len(got))
	}
}

// What the API's schema refuses first, the store refuses too, for fronts
// without a schema (the portal's forms): no types, unknown types, too
// many, a description too long, a status or a rotation out of range.
// Nothing is made or changed.
func TestEndpointFieldsChecked(t *testing.T) {
	f := newFixture(t)
	e := f.endpoint(t, "https://hooks.example.com/fields", "*")
	all := permissions(auth.KindMerchant)
	long := strings.Repeat("d", MaxDescription+1)
	many := slices.Repeat([]string{event.InvoicePaid.Name}, MaxEventTypes+1)
	for _, c := range []struct {
		name  string
		types []string
		desc  *string
		field string
	}{
		{"no types", []string{}, nil, "eventTypes"},
		{"no types given", nil, nil, "eventTypes"},
		{"an unknown type", []string{event.InvoicePaid.Name, "invoice.eaten"}, nil, "eventTypes"},
		{"too many types", many, nil, "eventTypes"},
		{"a description too long", []string{"*"}, &long, "description"},
	} {
		_, _, _, err := f.store.Create(context.Background(), Actor{OrganizationID: f.org, Permissions: all}, NewEndpoint{URL: "https://hooks.example.com/x", EventTypes: c.types, Description: c.desc}, nil)
		if r := rule.As(err); r == nil || r.Kind != rule.Invalid || r.Fields[c.field] == nil {
			t.Errorf("create with %s: %v, want invalid %s", c.name, err, c.field)
		}
		if c.types == nil {
			continue
		}
		_, err = f.store.Update(context.Background(), Actor{OrganizationID: f.org, Permissions: all}, e.ID, Change{EventTypes: c.types, Description: c.desc})
		if r := rule.As(err); r == nil || r.Kind != rule.Invalid || r.Fields[c.field] == nil {
			t.Errorf("change to %s: %v, want invalid %s", c.name, err, c.field)
		}
	}
	_, err := f.store.Update(context.Background(), Actor{OrganizationID: f.org, Permissions: all}, e.ID, Change{Status: new("paused")})
	if r := rule.As(err); r == nil || r.Fields["status"] == nil {
		t.Errorf("status paused: %v", err)
	}
	for _, overlap := range []time.Duration{-time.Second, RotationOverlap + time.Second} {
		_, _, _, err := f.store.RotateSecret(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, e.ID, overlap, nil)
		if r := rule.As(err); r == nil || r.Fields["expireCurrentInSeconds"] == nil {
			t.Errorf("rotation keeping the old secret %s: %v", overlap, err)
		}
	}
	list, err := f.store.Endpoints(context.Background(), f.org)
	if err != nil || len(list) != 1 || list[0].Status != Enabled || len(list[0].EventTypes) != 1 || list[0].EventTypes[0] != "*" {
		t.Errorf("endpoints after the refusals: %+v, %v", list, err)
	}
}
