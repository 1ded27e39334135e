package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
)

// payreq demo registers the simulator's five kinds of terminal; terminals
// add, list and remove manage them, and refuse what is wrong with exit 2.
func TestTerminalsAddListRemove(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.demo().Merchant.OrganizationID
	var seeded []models.Terminal
	if err := json.Unmarshal([]byte(c.ok("terminals", "list", "--org", org.String(), "--json")), &seeded); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, tm := range seeded {
		kinds = append(kinds, tm.Hsn[:strings.LastIndex(tm.Hsn, "-")+1])
	}
	if len(seeded) != 5 {
		t.Fatalf("the demo's terminals: %+v", seeded)
	}
	for _, want := range []string{"SIM-OK-", "SIM-CHIP-", "SIM-DECLINE-", "SIM-SLOW-", "SIM-OFFLINE-"} {
		found := false
		for _, k := range kinds {
			found = found || k == want
		}
		if !found {
			t.Errorf("no %s terminal among %v", want, kinds)
		}
	}
	mid := seeded[0].MerchantAccountId.String()
	hsn := "C032UQ" + strings.ToUpper(uuid.NewString()[:8])
	var added models.Terminal
	if err := json.Unmarshal([]byte(c.ok("terminals", "add", "--mid", mid, "--hsn", hsn, "--name", "Front counter", "--json")), &added); err != nil {
		t.Fatal(err)
	}
	if added.Hsn != hsn || added.Name != "Front counter" || added.MerchantAccountId.String() != mid || added.Status != models.TerminalStatusOffline {
		t.Fatalf("added %+v", added)
	}
	if out := c.ok("terminals", "list", "--org", org.String()); !strings.Contains(out, hsn) || strings.Count(out, "\n") != 6 {
		t.Fatalf("list:\n%s", out)
	}
	if msg := c.usage("terminals", "add", "--mid", mid, "--hsn", hsn, "--name", "Again"); !strings.Contains(msg, "registered already") {
		t.Errorf("an HSN twice: %s", msg)
	}
	c.usage("terminals", "add", "--mid", uuid.NewString(), "--hsn", "C1", "--name", "Nowhere")
	c.usage("terminals", "add", "--mid", "nope", "--hsn", "C1", "--name", "N")
	c.usage("terminals", "add", "--mid", mid, "--hsn", "has space", "--name", "N")
	c.usage("terminals", "add", "--mid", mid, "--hsn", "C2", "--name", "")
	c.usage("terminals", "remove", uuid.NewString())
	c.usage("terminals", "frob")
	if out := c.ok("terminals", "remove", added.Id.String()); !strings.Contains(out, "removed") {
		t.Errorf("remove: %s", out)
	}
	if out := c.ok("terminals", "list", "--org", org.String()); strings.Contains(out, hsn) {
		t.Errorf("a removed terminal listed:\n%s", out)
	}
}
