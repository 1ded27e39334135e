package main

import (
	"slices"
	"strings"

	"github.com/payreq/payreq/internal/auth"
)

// commandHelp is each command's usage, answered to --help (or -h) anywhere
// in its arguments, with exit status 0.
var commandHelp = map[string]string{
	"serve": `usage: payreq serve
Serves the API, the pay page and the docs until SIGTERM or SIGINT; requests in
flight finish first. Configuration comes from DATABASE_URL and PAYREQ_*
variables (docs/operations.md, "Configuration").`,
	"migrate": `usage: payreq migrate
Applies the database migrations the database lacks; safe twice, and from two
processes at once.`,
	"demo": `usage: payreq demo [--json] [--bare]
Seeds a demo merchant (two locations, three MIDs, the simulator's five kinds
of card terminal on its first MID) with its last 60 days (12 customers, 40
invoices in every status, card and recorded payments, refunds, deposits, a
recurring invoice), a reseller whose portfolio holds it, five
applications, and one key with every permission for each organization; prints their ids and keys (--json: one JSON object).
--bare leaves out the merchant's 60 days: no customers, invoices or payments.`,
	"keys create": `usage: payreq keys create --org ORG --name NAME --permissions p1,p2 [--json]
Makes an API key for the organization, as its first Owner (the key's
permissions must be among the Owner's), and prints its id and its
secret (shown once). --json prints {"keyId","secret","organizationId","permissions"}.
Permissions of merchant organizations: ` + strings.Join(auth.PermissionsFor(auth.KindMerchant), ", ") + `
Permissions of reseller organizations: ` + strings.Join(auth.PermissionsFor(auth.KindReseller), ", "),
	"keys list": `usage: payreq keys list --org ORG
Lists the organization's keys, revoked ones too: id, name, permissions, state.`,
	"keys revoke": `usage: payreq keys revoke KEY_ID
Revokes a key: no new token at once; tokens already issued stop working within
PAYREQ_REVOCATION_CHECK_INTERVAL.`,
	"orgs create": `usage: payreq orgs create --kind merchant|reseller --name NAME [--slug SLUG] [--reseller ORG] [--json]
Makes an active organization; a merchant with --reseller joins that
reseller's portfolio. A reseller gets a public sign-up page for merchant
applications, PAYREQ_PUBLIC_URL/apply/SLUG: SLUG is 3 to 40 of a-z, 0-9 and -,
unique; without --slug it is made from the name (a number added when taken).
It prints the page's address (--json: signUpUrl). Then: users create (its
Owner), keys create.`,
	"users create": `usage: payreq users create --org ORG --name NAME --email EMAIL --role Owner|Admin|Member [--permissions p1,p2] [--json]
Makes a membership of the organization and emails its invitation link
(PAYREQ_PUBLIC_URL/portal/invitations/…, 72 hours, one use) through the
outbox; the person then chooses a password (or signs in, when the email has
one already). Without --permissions the member holds every permission offered
to the organization's kind. --json prints
{"id","organizationId","name","email","role","permissions","invitationUrl"}.`,
	"users remove": `usage: payreq users remove --org ORG --email EMAIL
Ends the membership of EMAIL in the organization: its portal sessions end;
the API keys it made keep working. The last Owner cannot be removed (exit 2).`,
	"locations create": `usage: payreq locations create --org ORG --name NAME --time-zone TZ --address-line1 A --city C --state S --postal-code P [--address-line2 A] [--receipt-name N] [--phone P] [--email E] [--json]
Adds an active location (store) to a merchant. TZ is an IANA time zone such
as America/Los_Angeles: pay pages, messages and the daily settlement cutoff
use it.`,
	"locations deactivate": `usage: payreq locations deactivate [--json] LOC
Stops a location taking new invoices; its MIDs and invoices stay.`,
	"mids create": `usage: payreq mids create --org ORG --location LOC --mid MID [--json]
Adds a merchant account (MID, 6 to 16 digits, unique in the organization) to a
location of the merchant.`,
	"terminals add": `usage: payreq terminals add --mid MID_ID --hsn HSN --name NAME [--json]
Registers a card terminal (CardPointe's Integrated Terminal API) on a MID, by
the MID's id (uuid, from GET /accounts): its sales are made on that MID. HSN is
the terminal's hardware serial number (unique; letters, digits and hyphens).
With the simulator, SIM-OK-…, SIM-CHIP-…, SIM-DECLINE-…, SIM-SLOW-… and
SIM-OFFLINE-… are its five kinds of terminal.`,
	"terminals list": `usage: payreq terminals list [--org ORG] [--json]
Lists the terminals (of one organization with --org): id, HSN, status, MID, name.`,
	"terminals remove": `usage: payreq terminals remove TERMINAL
Removes a terminal; its payments stay. A terminal a payment waits on is kept
(exit 2).`,
	"orgs suspend": `usage: payreq orgs suspend ORG
Suspends an organization: its keys get no new token, its tokens get 403 and its
pay pages take no payment.`,
	"orgs reinstate": `usage: payreq orgs reinstate ORG
Lifts an organization's suspension.`,
	"applications add": `usage: payreq applications add --org RESELLER --file application.json
Adds a merchant application submitted through a reseller, with the rules of
its sign-up page (PAYREQ_PUBLIC_URL/apply/SLUG). The file is one JSON object,
every key required unless marked optional:
  {"business": {"legalName", "dbaName" (optional), "entityType", "taxId" (9 digits),
                "phone" (optional), "email", "website" (optional),
                "address": {"line1", "line2" (optional), "city", "state", "postalCode"}},
   "owners": [1 to 4 of {"name", "title",
               "ownershipPercent" (0-100, 2 decimals, a number or a string; all
                                   owners' together at most 100),
               "ssn" (9 digits)}],
   "bank": {"routingNumber" (9 digits passing the ABA checksum),
            "accountNumber" (4 to 17 digits)}}
Every problem is named by its field (business.taxId, owners.0.ssn), never by
its value. A suspended reseller takes no applications. Tax ids, SSNs and
account numbers are stored encrypted; only their last four digits are ever
shown.`,
	"applications stage": `usage: payreq applications stage ID STAGE [--note TEXT]
Moves an application to a stage: submitted, in_review, needs_info, approved,
declined or boarded.`,
	"settle": `usage: payreq settle --org ORG
Closes every open batch of the organization's MIDs now (batches dated today in
each location's time zone), marks deposits whose day has come paid, and prints
the deposits made, one JSON object per line as GET /deposits/{id} shows them.
Nothing to settle prints nothing. The daily cutoff (PAYREQ_SETTLEMENT_CUTOFF)
does the same in payreq serve.`,
	"secrets init": `usage: payreq secrets init --dir DIR
Writes a new Ed25519 signing key (signing-key.pem), pepper (pepper) and
encryption key (encryption-key) into DIR, readable by their owner only, and
prints their paths. It never overwrites a file: when one exists it writes
nothing and exits with status 2. Give every instance the same files; with
DATABASE_URL set, payreq refuses to start without them (only the private
development cluster makes its own).`,
	"secrets reencrypt": `usage: payreq secrets reencrypt [--lock-timeout 30s]
Re-seals every stored tax id, SSN, bank account number, webhook secret,
portal second factor (TOTP secret) and undelivered portal notice that is sealed under another key than the encryption key file's first (the
current one), a batch at a time, and prints how many it re-sealed. Rows
other transactions hold are waited for, up to --lock-timeout in all; a value
still under an older key then makes it exit 1, naming how many of each kind
remain under which key. Safe to run while instances serve and to run again
(it then re-seals nothing). To rotate: put a new key first in the file on
every instance (payreq reads every key in it), restart them, run this, and
remove the old key only once it exits 0.`,
	"db-stop": `usage: payreq db-stop
Stops the private PostgreSQL cluster under PAYREQ_DATA_DIR.`,
}

// helpFor is the usage of the command args name when they ask for help,
// and whether they do.
func helpFor(args []string) (string, bool) {
	if !slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" || a == "-help" }) {
		return "", false
	}
	if len(args) >= 2 {
		if text, ok := commandHelp[args[0]+" "+args[1]]; ok {
			return text, true
		}
	}
	if text, ok := commandHelp[args[0]]; ok {
		return text, true
	}
	return usage, true
}
