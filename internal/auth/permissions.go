// Package auth holds API keys, access tokens and the rules of who may do what.
//
// It owns the tables api_keys and token_requests. A key's creator (a
// membership, internal/people's) and its organization's status
// (internal/directory's) are asked of Members and Organizations.
package auth

import (
	"slices"
	"strings"
)

// Permissions a key can carry.
const (
	PaymentsView     = "payments.view"
	PaymentsCreate   = "payments.create"
	PaymentsRefund   = "payments.refund"
	LocationsView    = "locations.view"
	AccountsView     = "accounts.view"
	PortfolioView    = "portfolio.view"
	ApplicationsView = "applications.view"
	EventsView       = "events.view"
	WebhooksManage   = "webhooks.manage"
)

// Organization kinds and the permissions offered to each.
const (
	KindMerchant = "merchant"
	KindReseller = "reseller"
)

var permissionsByKind = map[string][]string{
	KindMerchant: {PaymentsView, PaymentsCreate, PaymentsRefund, LocationsView, AccountsView, EventsView, WebhooksManage},
	KindReseller: {PortfolioView, ApplicationsView, EventsView, WebhooksManage},
}

// PermissionsFor lists the permissions offered to an organization of kind.
func PermissionsFor(kind string) []string {
	return slices.Clone(permissionsByKind[kind])
}

// Scope is the space-separated form used in tokens.
func Scope(permissions []string) string { return strings.Join(permissions, " ") }
