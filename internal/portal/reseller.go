package portal

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/reseller"
)

// The reseller's side: its portfolio (portfolio.view), its merchants'
// applications (applications.view) and, on both, the address of its
// sign-up page to send to merchants. What the pages show is what the API
// answers (reseller.Store.Merchants, Applications, Application): of the
// tax id, the SSNs and the account number only their last four digits.

// stageWords are an application's stages in words, in reseller.Stages'
// order.
var stageWords = map[string]string{
	"submitted": "Submitted", "in_review": "In review", "needs_info": "Needs information",
	"approved": "Approved", "declined": "Declined", "boarded": "Boarded",
}

// merchantStatusWords are a portfolio merchant's statuses in words.
var merchantStatusWords = map[string]string{
	"onboarding": "Onboarding", "active": "Active", "suspended": "Suspended", "closed": "Closed",
}

// signUpLink is the reseller's sign-up page as its pages show it, with
// the copy button's script.
type signUpLink struct {
	URL    string
	Open   bool // false: the reseller is suspended, the page takes nothing
	Script string
}

// signUpLink reads the member's organization's sign-up page and lets the
// page answered run the copy button's script.
func (h *handler) signUpLink(c echo.Context) (signUpLink, error) {
	p, err := h.Resellers.SignUpPageFor(c.Request().Context(), visitOf(c).Membership.OrganizationID)
	if err != nil {
		return signUpLink{}, err
	}
	h.allowScript(c, copyScript)
	return signUpLink{URL: reseller.SignUpURL(h.PublicURL, p.Slug), Open: p.Open(), Script: copyScript}, nil
}

type portfolioMerchant struct {
	Name, Status string
	Products     []string
}

type portfolioData struct {
	Merchants []portfolioMerchant
	SignUp    signUpLink
}

// portfolio is GET /portal/portfolio: the merchants of the reseller's
// portfolio by name, each with its status and products; ?format=csv
// exports them (one page: a portfolio is not paged).
func (h *handler) portfolio(c echo.Context) error {
	merchants, err := h.Resellers.Merchants(c.Request().Context(), visitOf(c).Membership.OrganizationID)
	if err != nil {
		return h.failure(c, err)
	}
	if c.QueryParam("format") == "csv" {
		return streamCSV(h, c, csvExport[reseller.Merchant]{Name: "portfolio", Columns: merchantColumns,
			Page: func(context.Context, int, string) ([]reseller.Merchant, string, error) { return merchants, "", nil }})
	}
	d := portfolioData{Merchants: make([]portfolioMerchant, len(merchants))}
	for i, m := range merchants {
		d.Merchants[i] = portfolioMerchant{Name: m.Name, Status: words(merchantStatusWords, m.Status)}
		for _, p := range m.Products {
			d.Merchants[i].Products = append(d.Merchants[i].Products, p.Name)
		}
	}
	if d.SignUp, err = h.signUpLink(c); err != nil {
		return h.failure(c, err)
	}
	return h.render(c, http.StatusOK, "portfolio", page{Title: "Portfolio", Data: d})
}

type stageChoice struct{ Value, Words string }

type applicationItem struct {
	reseller.Application
	StageWords string
}

type applicationsData struct {
	listData[applicationItem]
	Stages []stageChoice
	SignUp signUpLink
}

// applications is GET /portal/applications: the reseller's applications,
// newest first, of one stage (?stage=) or all, a page at a time as the
// API pages them, or all of them as CSV (?format=csv), by the list page
// pattern.
func (h *handler) applications(c echo.Context) error {
	org := visitOf(c).Membership.OrganizationID
	q, err := h.listQuery(c)
	if err != nil {
		return h.failure(c, err)
	}
	stage := q.Choice("stage", reseller.Stages)
	list := func(ctx context.Context, limit int, cursor string) ([]reseller.Application, string, error) {
		return h.Resellers.Applications(ctx, org, stage, min(limit, reseller.MaxLimit), cursor)
	}
	if !q.Failed() && q.CSV {
		return streamCSV(h, c, csvExport[reseller.Application]{Name: "applications", Zone: q.Zone, Columns: applicationColumns, Page: list})
	}
	d := applicationsData{Stages: []stageChoice{}}
	for _, s := range reseller.Stages {
		d.Stages = append(d.Stages, stageChoice{s, stageWords[s]})
	}
	if d.SignUp, err = h.signUpLink(c); err != nil {
		return h.failure(c, err)
	}
	if !q.Failed() {
		item := func(a reseller.Application) applicationItem {
			return applicationItem{Application: a, StageWords: words(stageWords, a.Stage)}
		}
		if err := fillList(c.Request().Context(), q, &d.listData, "/portal/applications", list, item); err != nil {
			return h.failure(c, err)
		}
	}
	return h.renderList(c, q, "applications", "Applications", d)
}

// applicationColumns are the columns of the applications' CSV: the API's
// names for its fields (nested ones with dots), the last fours only.
var applicationColumns = []csvColumn[reseller.Application]{
	{"id", func(a reseller.Application) string { return a.ID.String() }},
	{"stage", func(a reseller.Application) string { return a.Stage }},
	{"submittedAt", func(a reseller.Application) string { return csvTime(&a.SubmittedAt, time.UTC) }},
	{"updatedAt", func(a reseller.Application) string { return csvTime(&a.UpdatedAt, time.UTC) }},
	{"business.legalName", func(a reseller.Application) string { return a.Business.LegalName }},
	{"business.dbaName", func(a reseller.Application) string { return optional.Value(a.Business.DBAName) }},
	{"business.entityType", func(a reseller.Application) string { return a.Business.EntityType }},
	{"business.taxIdLastFour", func(a reseller.Application) string { return a.Business.TaxIDLastFour }},
	{"business.email", func(a reseller.Application) string { return a.Business.Email }},
	{"business.phone", func(a reseller.Application) string { return optional.Value(a.Business.Phone) }},
	{"bank.routingNumber", func(a reseller.Application) string { return a.Bank.RoutingNumber }},
	{"bank.accountLastFour", func(a reseller.Application) string { return a.Bank.AccountLastFour }},
}

type applicationData struct {
	reseller.Application
	StageWords      string
	EntityTypeWords string
	Steps           []historyItem // History in words
}

type historyItem struct {
	reseller.HistoryEntry
	StageWords string
}

// application is GET /portal/applications/:id: one application of the
// reseller, its values masked as the API masks them, and its stage
// history, oldest first. Another reseller's id is a 404, as an unknown
// one is.
func (h *handler) application(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	a, err := h.Resellers.Application(c.Request().Context(), visitOf(c).Membership.OrganizationID, id)
	if errors.Is(err, reseller.ErrNotFound) {
		return h.notFound(c)
	}
	if err != nil {
		return h.failure(c, err)
	}
	d := applicationData{Application: a, StageWords: words(stageWords, a.Stage), EntityTypeWords: a.Business.EntityType}
	for _, t := range reseller.EntityTypes {
		if t[0] == a.Business.EntityType {
			d.EntityTypeWords = t[1]
		}
	}
	for _, e := range a.History {
		d.Steps = append(d.Steps, historyItem{HistoryEntry: e, StageWords: words(stageWords, e.Stage)})
	}
	return h.render(c, http.StatusOK, "application", page{Title: "Application of " + a.Business.LegalName, Data: d})
}

// words is the words of value in list, or the value itself.
func words(list map[string]string, value string) string {
	if w, ok := list[value]; ok {
		return w
	}
	return value
}

// merchantColumns are the columns of the portfolio's CSV: the API's names,
// products by their keys separated by spaces.
var merchantColumns = []csvColumn[reseller.Merchant]{
	{"id", func(m reseller.Merchant) string { return m.ID.String() }},
	{"name", func(m reseller.Merchant) string { return m.Name }},
	{"status", func(m reseller.Merchant) string { return m.Status }},
	{"products", func(m reseller.Merchant) string {
		keys := make([]string, len(m.Products))
		for i, p := range m.Products {
			keys[i] = p.Key
		}
		return strings.Join(keys, " ")
	}},
}
