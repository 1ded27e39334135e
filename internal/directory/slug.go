package directory

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/payreq/payreq/internal/auth"
)

// A reseller's slug names its sign-up page, /apply/{slug}: 3 to 40 of a-z,
// 0-9 and '-', unique among organizations, held by resellers only.
var slugPattern = regexp.MustCompile(`^[a-z0-9-]{3,40}$`)

// ValidSlug reports whether s may be a reseller's slug.
func ValidSlug(s string) bool { return slugPattern.MatchString(s) }

// ErrSlugTaken: another organization holds the slug asked for.
var ErrSlugTaken = errors.New("directory: slug taken")

// slugBase is a slug made from an organization's name: accents dropped,
// lower case, every run of other characters one '-', at most 36
// characters (room for "-999"), "reseller" when too little is left.
func slugBase(name string) string {
	folded, _, err := transform.String(transform.Chain(norm.NFKD, runes.Remove(runes.In(unicode.Mn))), name)
	if err != nil {
		folded = name
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(folded) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	base := strings.Trim(b.String()[:min(b.Len(), 36)], "-")
	if len(base) < 3 {
		return "reseller"
	}
	return base
}

// NewOrganization is an organization to insert.
type NewOrganization struct {
	ID      uuid.UUID
	Name    string
	Kind    string
	Status  string
	LogoURL *string
	// Slug of a reseller: "" makes one from its name that no organization
	// holds; one given that another holds is ErrSlugTaken.
	Slug string
}

// InsertOrganization adds an organization inside tx and returns its slug
// ("" for a merchant) and when it was made: the one way an organization is
// made, so that every reseller has a slug.
func InsertOrganization(ctx context.Context, tx *sqlx.Tx, o NewOrganization) (slug string, createdAt time.Time, err error) {
	insert := func(slug *string) (bool, error) {
		// ON CONFLICT waits for a concurrent insert of the same slug, and
		// then inserts nothing: the slug is taken.
		rows, err := tx.QueryxContext(ctx, `INSERT INTO organizations (id, name, kind, status, logo_url, slug)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (slug) DO NOTHING RETURNING created_at`,
			o.ID, o.Name, o.Kind, o.Status, o.LogoURL, slug)
		if err != nil {
			return false, fmt.Errorf("directory: unable to add organization: %w", err)
		}
		defer rows.Close()
		if !rows.Next() {
			return false, rows.Err()
		}
		return true, rows.Scan(&createdAt)
	}
	switch {
	case o.Kind != auth.KindReseller:
		_, err := insert(nil)
		return "", createdAt, err
	case o.Slug != "":
		made, err := insert(&o.Slug)
		if err == nil && !made {
			err = ErrSlugTaken
		}
		return o.Slug, createdAt, err
	}
	base := slugBase(o.Name)
	for {
		// The first of base, base-2, base-3, … that none holds; one taken
		// meanwhile by another transaction makes this look again.
		var taken []string
		if err := tx.SelectContext(ctx, &taken, `SELECT slug FROM organizations WHERE slug = $1 OR slug ~ ('^' || $1 || '-[0-9]+$')`, base); err != nil {
			return "", time.Time{}, fmt.Errorf("directory: unable to read slugs: %w", err)
		}
		slug := base
		for n := 2; slices.Contains(taken, slug); n++ {
			slug = base + "-" + strconv.Itoa(n)
		}
		made, err := insert(&slug)
		if err != nil || made {
			return slug, createdAt, err
		}
	}
}
