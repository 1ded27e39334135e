package portal

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

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
// portfolio by name, each with its status and products.
func (h *handler) portfolio(c echo.Context) error {
	merchants, err := h.Resellers.Merchants(c.Request().Context(), visitOf(c).Membership.OrganizationID)
	if err != nil {
		return h.failure(c, err)
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

// Page sizes of the applications list, as the API pages it.
const (
	applicationsPageSize    = 25
	applicationsMaxPageSize = reseller.MaxLimit
)

type stageChoice struct{ Value, Words string }

type applicationItem struct {
	reseller.Application
	StageWords string
}

type applicationsData struct {
	Stages []stageChoice
	Stage  string // the filter chosen, "" for all
	Items  []applicationItem
	Next   string // the next page's address, "" on the last
	Failed bool   // the query was refused: no list
	SignUp signUpLink
}

// applications is GET /portal/applications: the reseller's applications,
// newest first, of one stage (?stage=) or all, a page at a time as the
// API pages them (?limit= 1–100, default 25; ?cursor= from the "Next
// page" link). A query it cannot take answers 400 with the form again
// and the message beside its field.
func (h *handler) applications(c echo.Context) error {
	d := applicationsData{Stages: []stageChoice{}}
	for _, s := range reseller.Stages {
		d.Stages = append(d.Stages, stageChoice{s, stageWords[s]})
	}
	p := page{Title: "Applications"}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		p.Errors.Add("", "The address of this page could not be read, so its filter was not applied. Choose the stage again.")
	}
	one := func(name string) string {
		if len(q[name]) > 1 {
			p.Errors.Add(name, "Choose one value.")
		}
		return strings.TrimSpace(q.Get(name))
	}
	var stage *string
	if d.Stage = one("stage"); d.Stage != "" {
		if reseller.ValidStage(d.Stage) {
			stage = &d.Stage
		} else {
			p.Errors.Add("stage", "Choose one of the stages offered.")
		}
	}
	limit := applicationsPageSize
	if s := one("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < reseller.MinLimit || n > applicationsMaxPageSize || s != strconv.Itoa(n) {
			p.Errors.Add("", "The page size (limit) must be a whole number from 1 to 100.")
		} else {
			limit = n
		}
	}
	cursor := one("cursor")
	if d.SignUp, err = h.signUpLink(c); err != nil {
		return h.failure(c, err)
	}
	if len(p.Errors) == 0 {
		apps, next, err := h.Resellers.Applications(c.Request().Context(), visitOf(c).Membership.OrganizationID, stage, limit, cursor)
		switch {
		case errors.Is(err, reseller.ErrInvalidCursor):
			p.Errors.Add("", "This page's address is out of date. Start again from the first page.")
		case err != nil:
			return h.failure(c, err)
		}
		for _, a := range apps {
			d.Items = append(d.Items, applicationItem{Application: a, StageWords: words(stageWords, a.Stage)})
		}
		if next != "" {
			v := url.Values{"cursor": {next}}
			if stage != nil {
				v.Set("stage", *stage)
			}
			if limit != applicationsPageSize {
				v.Set("limit", strconv.Itoa(limit))
			}
			d.Next = "/portal/applications?" + v.Encode()
		}
	}
	status := http.StatusOK
	if len(p.Errors) > 0 {
		status, d.Failed, d.Items, d.Next = http.StatusBadRequest, true, nil, ""
		if len(p.Errors) == 1 && p.Errors[0].Field == "" {
			p.Errors, p.Alert = nil, p.Errors[0].Message
		}
	}
	p.Data = d
	return h.render(c, status, "applications", p)
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
