package faults

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/smtpfake"
)

// Scheduled sends and reminders with two instances on one database, one
// killed by SIGKILL while it holds deliveries (its mail server stalls),
// then started again: every scheduled link and every due reminder goes
// out once, the killed instance's messages delivered by the other once
// their lease ends, and the restarted instance sends nothing twice.
func TestSchedulesSurviveAKilledInstance(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	const lease = 10 * time.Second // each try gets 5 s: the kill comes within it
	d.Env["PAYREQ_DELIVERY_LEASE"] = lease.String()
	d.Env["PAYREQ_DELIVERY_BACKOFF"] = "100ms"
	d.Env["PAYREQ_SCHEDULE_POLL_INTERVAL"] = "100ms"
	keys := d.seed(t)

	remindMID, today := remindableMID(t, d, keys.Merchant.OrganizationID)

	mailA := smtpfake.Start(t, smtpfake.StallData)
	mailB := smtpfake.Start(t, smtpfake.Accept)
	a := d.start(t, "a", map[string]string{"PAYREQ_SMTP_URL": mailA.URL("a@example.com")})
	b := d.start(t, "b", map[string]string{"PAYREQ_SMTP_URL": mailB.URL("b@example.com"), "PAYREQ_ADDR": freeAddr(t)})
	c := httpClient("127.0.0.1", 30*time.Second)
	tok := token(t, c, b.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, b.URL, tok)
	if r := send(c, "PUT", b.URL+"/reminder-settings", tok, map[string]any{"enabled": true, "offsetsDays": []int{0}}, nil); r.Status != http.StatusOK {
		t.Fatalf("reminder settings: %v", r)
	}

	// Reminders are due at once; the scheduled links a few seconds after the
	// reminders' invoices are made (the creations take a second or two under
	// the race detector on a loaded machine, and sendAt must still be ahead).
	const n = 8
	var reminded, scheduled []string
	for i := range n {
		body := invoiceBody(remindMID, fmt.Sprintf("REMIND-%d", i), false)
		body["dueDate"] = today
		r := send(c, "POST", b.URL+"/payment-requests", tok, body, nil)
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %v", r)
		}
		reminded = append(reminded, created(t, r))
	}
	due := time.Now().Add(4 * time.Second)
	for i := range n {
		body := invoiceBody(mid, fmt.Sprintf("LATER-%d", i), true)
		body["sendAt"] = due.UTC().Format(time.RFC3339Nano)
		r := send(c, "POST", b.URL+"/payment-requests", tok, body, nil)
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %v", r)
		}
		scheduled = append(scheduled, created(t, r))
	}

	// Kill a while it is delivering (its mail server takes the message and
	// never answers), after the scheduled sends have come due.
	time.Sleep(time.Until(due))
	eventually(t, 15*time.Second, "a is delivering", func() bool { return mailA.Stalled() > 0 })
	stalled := mailA.Stalled()
	a.kill()
	killedAt := time.Now()
	t.Logf("a killed while delivering %d messages", stalled)

	db := openDB(t, dsn)
	count := func(kind string, ids []string) (messages, delivered int) {
		t.Helper()
		err := db.QueryRow(`SELECT count(*), count(delivered_at) FROM outbox WHERE kind = $1 AND invoice_id::text = ANY(string_to_array($2, ','))`,
			kind, strings.Join(ids, ",")).Scan(&messages, &delivered)
		if err != nil {
			t.Fatal(err)
		}
		return messages, delivered
	}
	eventually(t, lease+30*time.Second, "every reminder and scheduled link is delivered", func() bool {
		rm, rd := count("reminder", reminded)
		sm, sd := count("pay_link", scheduled)
		return rm == n && rd == n && sm == n && sd == n
	})
	t.Logf("all delivered %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	// a again: nothing is sent twice.
	d.start(t, "a again", map[string]string{"PAYREQ_SMTP_URL": mailB.URL("a@example.com"), "PAYREQ_ADDR": freeAddr(t)})
	time.Sleep(2 * time.Second)
	for _, ids := range [][]string{reminded, scheduled} {
		for _, id := range ids {
			var messages, reminders int
			var sentAt *time.Time
			if err := db.QueryRow(`SELECT (SELECT count(*) FROM outbox WHERE invoice_id = i.id), i.reminders_sent, i.sent_at
				FROM invoices i WHERE i.id = $1`, uuid.MustParse(id)).Scan(&messages, &reminders, &sentAt); err != nil {
				t.Fatal(err)
			}
			if messages != 1 {
				t.Errorf("invoice %s has %d messages, want 1", id, messages)
			}
			if slices.Contains(reminded, id) && reminders != 1 {
				t.Errorf("invoice %s: remindersSent %d, want 1", id, reminders)
			}
			if slices.Contains(scheduled, id) && sentAt == nil {
				t.Errorf("invoice %s: its scheduled send is not recorded", id)
			}
		}
	}
	var messageIDs []string
	if err := db.Select(&messageIDs, `SELECT '<' || id || '@payreq>' FROM outbox`); err != nil {
		t.Fatal(err)
	}
	got := mailB.ByMessageID()
	for _, id := range messageIDs {
		if got[id] != 1 {
			t.Errorf("message %s arrived %d times at b's mail server, want once", id, got[id])
		}
	}
	if n := len(mailA.Received()); n != 0 {
		t.Errorf("a's stalled mail server took %d messages", n)
	}
}

// remindableMID makes a MID of org in a location where it is now between
// about 10:00 and 14:00, so that a reminder due today (offset 0) is due
// now whatever the test's hour, and returns its id and today's date there.
func remindableMID(t *testing.T, d *deployment, org string) (id, today string) {
	t.Helper()
	now := time.Now().UTC()
	hours := (12 - now.Hour() + 24) % 24
	if hours > 12 {
		hours -= 24 // Etc/GMT zones run from UTC-12 to UTC+14
	}
	zone := fmt.Sprintf("Etc/GMT%+d", -hours) // POSIX: Etc/GMT-2 is UTC+2
	if hours == 0 {
		zone = "UTC"
	}
	today = now.Add(time.Duration(hours) * time.Hour).Format(time.DateOnly)
	var loc struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(d.cli(t, "locations", "create", "--org", org, "--name", "Reminders",
		"--time-zone", zone, "--address-line1", "1 Main St", "--city", "Austin", "--state", "TX", "--postal-code", "78701", "--json")), &loc); err != nil {
		t.Fatal(err)
	}
	var mid struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(d.cli(t, "mids", "create", "--org", org, "--location", loc.ID,
		"--mid", fmt.Sprintf("9%011d", rand.Int64N(1e11)), "--json")), &mid); err != nil {
		t.Fatal(err)
	}
	return mid.ID, today
}
