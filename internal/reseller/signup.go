package reseller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// SignUpPage is a reseller as its public sign-up page shows it.
type SignUpPage struct {
	ResellerID uuid.UUID
	Name       string
	Slug       string
	Status     string
}

// Open reports whether the page takes applications: a suspended reseller's
// does not (Submit refuses them).
func (p SignUpPage) Open() bool { return p.Status != "suspended" }

// SignUpPageOf reads the reseller whose sign-up page slug names; a slug no
// reseller holds is a rule.NotFound.
func (a *Store) SignUpPageOf(ctx context.Context, slug string) (SignUpPage, error) {
	o, err := directory.OrganizationBySlug(ctx, a.DB, slug)
	if errors.Is(err, directory.ErrNoOrganization) || err == nil && o.Kind != auth.KindReseller {
		return SignUpPage{}, rule.New(rule.NotFound, "", "Page not found",
			"There is no sign-up page at this address. Check the link you were given.")
	}
	if err != nil {
		return SignUpPage{}, fmt.Errorf("reseller: unable to read sign-up page: %w", err)
	}
	return signUpPage(o), nil
}

// SignUpPageFor reads the sign-up page of the reseller resellerID; an
// organization that is no reseller is a rule.NotFound.
func (a *Store) SignUpPageFor(ctx context.Context, resellerID uuid.UUID) (SignUpPage, error) {
	o, err := directory.OrganizationByID(ctx, a.DB, resellerID)
	if errors.Is(err, directory.ErrNoOrganization) || err == nil && o.Kind != auth.KindReseller {
		return SignUpPage{}, rule.New(rule.NotFound, "", "Not a reseller", "Only a reseller has a sign-up page.")
	}
	if err != nil {
		return SignUpPage{}, fmt.Errorf("reseller: unable to read sign-up page: %w", err)
	}
	return signUpPage(o), nil
}

// signUpPage is a reseller's page; a reseller always has a slug.
func signUpPage(o directory.Organization) SignUpPage {
	return SignUpPage{ResellerID: o.ID, Name: o.Name, Slug: *o.Slug, Status: o.Status}
}

// SignUpURL is the address of the sign-up page of slug under the
// service's public URL: {PAYREQ_PUBLIC_URL}/apply/{slug}.
func SignUpURL(publicURL, slug string) string {
	return strings.TrimRight(publicURL, "/") + "/apply/" + slug
}

// EntityTypes are the kinds of business the sign-up page offers, each
// with its words: value, words. (An application added from a file may
// name another.)
var EntityTypes = [][2]string{
	{"sole_proprietorship", "Sole proprietorship"},
	{"partnership", "Partnership"},
	{"llc", "Limited liability company (LLC)"},
	{"corporation", "Corporation"},
	{"nonprofit", "Nonprofit organization"},
}

// Limits of the sign-up form: at most SubmissionLimit submissions from one
// client address (an IPv6 address's /64) in SubmissionWindow.
const (
	SubmissionLimit  = 5
	SubmissionWindow = time.Hour
)

// SubmissionFrom counts a submission of the sign-up form from network (a
// client address, or an IPv6 address's /64, as framing.Network gives it),
// across every instance. Past the limit it counts nothing and refuses it
// (rule.Limited, with how long until the oldest counted submission leaves
// the window).
func (a *Store) SubmissionFrom(ctx context.Context, network string) error {
	l := postgres.Limit{Table: "application_limits", Max: SubmissionLimit, Window: SubmissionWindow}
	wait, err := l.Attempt(ctx, a.DB, network, a.Now())
	if err != nil {
		return err
	}
	if wait > 0 {
		return &rule.Error{Kind: rule.Limited, Title: "Too many applications",
			Message:    fmt.Sprintf("At most %d applications an hour can be sent from one network.", SubmissionLimit),
			RetryAfter: wait}
	}
	return nil
}

// DeleteOldSubmissions forgets submissions that no longer count.
func (a *Store) DeleteOldSubmissions(ctx context.Context) error {
	if _, err := a.DB.ExecContext(ctx, `DELETE FROM application_limits WHERE attempted_at < $1`, a.Now().Add(-SubmissionWindow)); err != nil {
		return fmt.Errorf("reseller: unable to delete old submissions: %w", err)
	}
	return nil
}
