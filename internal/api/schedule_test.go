package api_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
)

// messages counts the invoice's messages in the outbox by kind.
func messages(t *testing.T, env *apitest.Env, id uuid.UUID, kind string) int {
	t.Helper()
	var n int
	if err := env.App.DB.Get(&n, `SELECT count(*) FROM outbox WHERE invoice_id = $1 AND kind = $2`, id, kind); err != nil {
		t.Fatal(err)
	}
	return n
}

func sendScheduled(t *testing.T, env *apitest.Env) int {
	t.Helper()
	n, err := env.App.Invoices.SendScheduled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func sendReminders(t *testing.T, env *apitest.Env) int {
	t.Helper()
	n, err := env.App.Invoices.SendReminders(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A send scheduled with sendAt goes out when its time comes, once; until
// then nothing is sent and scheduledSendAt says when; a send now, or a
// cancellation, clears it. Bad times are 400s keyed sendAt.
func TestScheduledSend(t *testing.T) {
	clock := apitest.NewClock(time.Date(2026, 3, 2, 15, 0, 0, 0, time.UTC))
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: clock})
	m := apitest.NewMerchant(t, env)
	at := clock.Now().Add(90 * time.Minute)
	scheduled := func(number string) models.Invoice {
		b := m.Body(number, "20.00")
		b["send"], b["sendAt"] = nil, at.Format(time.RFC3339)
		return m.MustCreate(t, b)
	}
	inv := scheduled("SCHED-1")
	apitest.Want(t, "scheduledSendAt", inv.ScheduledSendAt != nil && inv.ScheduledSendAt.Equal(at), true)
	apitest.Want(t, "sentAt before", inv.SentAt == nil && inv.SentVia == nil, true)
	apitest.Want(t, "messages before", messages(t, env, inv.Id, "pay_link"), 0)

	for _, c := range []struct {
		name string
		edit func(map[string]any)
	}{
		{"past", func(b map[string]any) { b["sendAt"] = clock.Now().Add(-time.Second).Format(time.RFC3339) }},
		{"now", func(b map[string]any) { b["sendAt"] = clock.Now().Format(time.RFC3339) }},
		{"over a year ahead", func(b map[string]any) { b["sendAt"] = clock.Now().AddDate(1, 0, 1).Format(time.RFC3339) }},
		{"with send false", func(b map[string]any) { b["send"], b["sendAt"] = false, at.Format(time.RFC3339) }},
	} {
		b := m.Body("SCHED-BAD", "1.00")
		c.edit(b)
		p := apitest.WantProblem(t, m.Create(t, b, nil), http.StatusBadRequest, "")
		if p.Errors == nil || len((*p.Errors)["sendAt"]) == 0 {
			t.Errorf("%s: errors %v, want sendAt", c.name, p.Errors)
		}
	}

	now := scheduled("SCHED-NOW")
	resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + now.Id.String() + "/send", Token: m.Token})
	var sent models.Invoice
	resp.JSON(t, &sent)
	apitest.Want(t, "send now clears scheduledSendAt", sent.ScheduledSendAt == nil && sent.SentAt != nil, true)
	cancelled := scheduled("SCHED-CANCEL")
	env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + cancelled.Id.String() + "/cancel", Token: m.Token}).JSON(t, &sent)
	apitest.Want(t, "cancel clears scheduledSendAt", sent.ScheduledSendAt == nil, true)

	apitest.Want(t, "sent before the time", sendScheduled(t, env), 0)
	clock.Advance(90*time.Minute - time.Second)
	apitest.Want(t, "sent a second before", sendScheduled(t, env), 0)
	clock.Advance(time.Second)
	apitest.Want(t, "sent at the time", sendScheduled(t, env), 1)
	apitest.Want(t, "sent again", sendScheduled(t, env), 0)
	m.Renew()
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "scheduledSendAt after", got.ScheduledSendAt == nil, true)
	apitest.Want(t, "sentAt after", got.SentAt != nil && got.SentAt.Equal(clock.Now()), true)
	apitest.Want(t, "messages after", messages(t, env, inv.Id, "pay_link"), 1)
	apitest.Want(t, "the sent-now invoice's messages", messages(t, env, now.Id, "pay_link"), 1)
	apitest.Want(t, "the cancelled invoice's messages", messages(t, env, cancelled.Id, "pay_link"), 0)
	apitest.Want(t, "invoice.sent events", len(eventsOf(t, m, "invoice.sent", inv.Id)), 1)
}

// Two instances on one database, looking at the same time: each
// scheduled send goes out once.
func TestScheduledSendTwoInstances(t *testing.T) {
	clock := apitest.NewClock(time.Date(2026, 3, 2, 15, 0, 0, 0, time.UTC))
	dsn, dir := pgtest.NewDatabase(t), t.TempDir()
	a := apitest.New(t, dsn, apitest.Options{Clock: clock, DataDir: dir})
	b := apitest.New(t, dsn, apitest.Options{Clock: clock, DataDir: dir})
	m := apitest.NewMerchant(t, a)
	var ids []uuid.UUID
	for i := range 12 {
		body := m.Body("TWO-"+string(rune('A'+i)), "5.00")
		body["send"], body["sendAt"] = nil, clock.Now().Add(time.Minute).Format(time.RFC3339)
		ids = append(ids, m.MustCreate(t, body).Id)
	}
	clock.Advance(time.Minute)
	counts := make([]int, 4)
	var wg sync.WaitGroup
	for i, env := range []*apitest.Env{a, b, a, b} {
		wg.Go(func() {
			n, err := env.App.Invoices.SendScheduled(context.Background())
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		})
	}
	wg.Wait()
	apitest.Want(t, "sends by all runs", counts[0]+counts[1]+counts[2]+counts[3], len(ids))
	for _, id := range ids {
		apitest.Want(t, "messages of "+id.String(), messages(t, a, id, "pay_link"), 1)
	}
}

// Reminders go out at 09:00 in the location's time zone on each offset's
// day, across a daylight-saving change; at most one a day; never after the
// invoice is paid (here by a recorded payment); only for invoices that
// follow an enabled schedule or ask for reminders themselves.
func TestReminders(t *testing.T) {
	// 2026-03-05 08:00 in New York (EST, UTC-5). Daylight saving starts
	// on Sunday 2026-03-08 at 02:00 (EDT, UTC-4).
	clock := apitest.NewClock(time.Date(2026, 3, 5, 13, 0, 0, 0, time.UTC))
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: clock})
	m := apitest.NewMerchant(t, env)
	if _, err := env.App.DB.Exec(`UPDATE locations SET time_zone = 'America/New_York'
		WHERE id = (SELECT location_id FROM merchant_accounts WHERE id = $1)`, m.MIDs[0].Id); err != nil {
		t.Fatal(err)
	}

	var rs models.ReminderSettings
	env.Do(apitest.Request{Method: "GET", Path: "/reminder-settings", Token: m.Token}).JSON(t, &rs)
	apitest.Want(t, "default settings", rs.Enabled == false && len(rs.OffsetsDays) == 5 && rs.OffsetsDays[0] == -3, true)
	for _, bad := range []any{[]int{1, 1}, []int{-31}, []int{91}, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		resp := env.Do(apitest.Request{Method: "PUT", Path: "/reminder-settings", Token: m.Token, Body: map[string]any{"enabled": true, "offsetsDays": bad}})
		apitest.WantProblem(t, resp, http.StatusBadRequest, "")
	}
	resp := env.Do(apitest.Request{Method: "PUT", Path: "/reminder-settings", Token: m.Token,
		Body: map[string]any{"enabled": true, "offsetsDays": []int{3, -3, 0}}})
	apitest.Want(t, "put", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &rs)
	apitest.Want(t, "offsets kept ascending", len(rs.OffsetsDays) == 3 && rs.OffsetsDays[0] == -3 && rs.OffsetsDays[2] == 3, true)

	due := func(number string, reminders any) models.Invoice {
		b := m.Body(number, "80.00")
		b["dueDate"], b["send"] = "2026-03-08", true
		if reminders != "absent" {
			b["reminders"] = reminders
		}
		return m.MustCreate(t, b)
	}
	inv := due("REMIND-1", "absent")
	optedOut := due("REMIND-OUT", false)
	noDue := m.MustCreate(t, m.Body("REMIND-NODUE", "10.00"))

	// Offset -3: Thursday March 5, 09:00 EST = 14:00 UTC.
	at := func(day, hour, minute int) {
		clock.Advance(time.Date(2026, 3, day, hour, minute, 0, 0, time.UTC).Sub(clock.Now()))
	}
	at(5, 13, 59)
	apitest.Want(t, "reminders at 08:59 EST", sendReminders(t, env), 0)
	at(5, 14, 0)
	apitest.Want(t, "reminders at 09:00 EST", sendReminders(t, env), 1)
	at(5, 22, 0)
	apitest.Want(t, "reminders later that day", sendReminders(t, env), 0)
	m.Renew()
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "remindersSent", got.RemindersSent, int32(1))
	apitest.Want(t, "lastRemindedAt", got.LastRemindedAt != nil && got.LastRemindedAt.Equal(time.Date(2026, 3, 5, 14, 0, 0, 0, time.UTC)), true)
	apitest.Want(t, "reminder messages", messages(t, env, inv.Id, "reminder"), 1)
	apitest.Want(t, "opted out", messages(t, env, optedOut.Id, "reminder"), 0)
	apitest.Want(t, "no due date", messages(t, env, noDue.Id, "reminder"), 0)
	apitest.Want(t, "invoice.reminder_sent events", len(eventsOf(t, m, "invoice.reminder_sent", inv.Id)), 1)

	// No offset on the 6th and the 7th.
	for _, day := range []int{6, 7} {
		at(day, 15, 0)
		apitest.Want(t, "reminders on March "+string(rune('0'+day)), sendReminders(t, env), 0)
	}
	// Offset 0: Sunday March 8, 09:00 EDT = 13:00 UTC (not 14:00).
	at(8, 12, 59)
	apitest.Want(t, "reminders at 08:59 EDT", sendReminders(t, env), 0)
	at(8, 13, 0)
	apitest.Want(t, "reminders at 09:00 EDT", sendReminders(t, env), 1)
	apitest.Want(t, "reminder messages on the due date", messages(t, env, inv.Id, "reminder"), 2)

	// Paid in full by a recorded payment: no reminder on March 11.
	at(9, 16, 0)
	m.Renew()
	apitest.Want(t, "record", record(t, m, inv.Id, map[string]any{"amount": "80.00", "method": "bank_transfer"}, nil).StatusCode, http.StatusCreated)
	at(11, 13, 0)
	apitest.Want(t, "reminders after paid", sendReminders(t, env), 0)
	apitest.Want(t, "reminder messages in all", messages(t, env, inv.Id, "reminder"), 2)

	// An invoice asking for reminders is reminded though the schedule is off.
	m.Renew()
	env.Do(apitest.Request{Method: "PUT", Path: "/reminder-settings", Token: m.Token,
		Body: map[string]any{"enabled": false, "offsetsDays": []int{0}}})
	b := m.Body("REMIND-OWN", "5.00")
	b["dueDate"], b["reminders"] = "2026-03-11", true
	own := m.MustCreate(t, b)
	follows := m.Body("REMIND-FOLLOWS", "5.00")
	follows["dueDate"] = "2026-03-11"
	followsInv := m.MustCreate(t, follows)
	apitest.Want(t, "reminders for the invoice asking", sendReminders(t, env), 1)
	apitest.Want(t, "its message", messages(t, env, own.Id, "reminder"), 1)
	apitest.Want(t, "the invoice following the disabled schedule", messages(t, env, followsInv.Id, "reminder"), 0)
}

// Two instances on one database, at once: one reminder each.
func TestRemindersTwoInstances(t *testing.T) {
	clock := apitest.NewClock(time.Date(2026, 6, 1, 15, 0, 0, 0, time.UTC))
	dsn, dir := pgtest.NewDatabase(t), t.TempDir()
	a := apitest.New(t, dsn, apitest.Options{Clock: clock, DataDir: dir})
	b := apitest.New(t, dsn, apitest.Options{Clock: clock, DataDir: dir})
	m := apitest.NewMerchant(t, a)
	if _, err := a.App.DB.Exec(`UPDATE locations SET time_zone = 'UTC' WHERE organization_id = $1`, m.Org); err != nil {
		t.Fatal(err)
	}
	a.Do(apitest.Request{Method: "PUT", Path: "/reminder-settings", Token: m.Token, Body: map[string]any{"enabled": true, "offsetsDays": []int{0}}})
	var ids []uuid.UUID
	for i := range 12 {
		body := m.Body("TWO-R-"+string(rune('A'+i)), "5.00")
		body["dueDate"] = "2026-06-01"
		ids = append(ids, m.MustCreate(t, body).Id)
	}
	counts := make([]int, 4)
	var wg sync.WaitGroup
	for i, env := range []*apitest.Env{a, b, a, b} {
		wg.Go(func() {
			n, err := env.App.Invoices.SendReminders(context.Background())
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		})
	}
	wg.Wait()
	apitest.Want(t, "reminders by all runs", counts[0]+counts[1]+counts[2]+counts[3], len(ids))
	for _, id := range ids {
		apitest.Want(t, "reminders of "+id.String(), messages(t, a, id, "reminder"), 1)
	}
}
