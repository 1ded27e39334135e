package directory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"golang.org/x/image/draw"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/mailaddr"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// Branding is what an organization's customers see of it, as its Owners
// and Admins set it (SetBranding): the pay page, the PDFs and the emails
// read it with BrandingOf (or inside Biller). Each member is optional:
// "" (nil) when unset.
type Branding struct {
	// Organization is the organization's own (legal) name.
	Organization string
	// DisplayName is the name customers know the business by.
	DisplayName string
	Logo        *Logo
	// AccentColor is "#rrggbb", lower case, with a contrast of at least
	// MinContrast with white.
	AccentColor  string
	SupportEmail string
	SupportPhone string
	// PaymentTermsDays: an invoice is due this many days after its issue
	// day (the invoice editor offers it).
	PaymentTermsDays *int
	// InvoiceFooter closes every invoice and receipt (at most
	// MaxFooter characters).
	InvoiceFooter string
}

// Name is the name customers see: the display name, else the
// organization's.
func (b Branding) Name() string {
	if b.DisplayName != "" {
		return b.DisplayName
	}
	return b.Organization
}

// Logo is an organization's logo as kept: a PNG at most LogoWidth pixels
// wide, named by the SHA-256 of its bytes.
type Logo struct {
	SHA256 string
	Width  int
	Height int
	// PNG is the image, when the reader asked for it (LogoPNG); never in
	// JSON (the PDFs' versions name the logo by its hash).
	PNG []byte `json:"-"`
}

// LogoPrefix is where logos are served (by the pay page front), each at
// LogoPrefix + its SHA-256 + ".png": an address that changes with the
// logo, so that it may be cached for good.
const LogoPrefix = "/pay/logos/"

// Path is the logo's address under the public URL.
func (l Logo) Path() string { return LogoPrefix + l.SHA256 + ".png" }

// Limits of the business settings.
const (
	MaxLogoBytes   = 1 << 20 // as uploaded
	MaxLogoSide    = 4000    // pixels, as uploaded, either way
	LogoWidth      = 512     // pixels, at most, as kept
	MaxFooter      = 500     // characters
	MaxNameLength  = 200     // characters: display and receipt names, address lines
	MaxPaymentDays = 365
	// MinContrast is the least contrast of the accent colour with white
	// (WCAG 2's AA level for text).
	MinContrast = 4.5
)

// BrandingOf reads the organization's branding through q.
func BrandingOf(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID) (Branding, error) {
	var r brandingRow
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+brandingColumns+`
		FROM organizations o LEFT JOIN logos lg ON lg.sha256 = o.logo_sha256 WHERE o.id = $1`, org)
	if errors.Is(err, sql.ErrNoRows) {
		return Branding{}, ErrNoOrganization
	}
	if err != nil {
		return Branding{}, fmt.Errorf("directory: unable to read branding: %w", err)
	}
	return r.branding(), nil
}

// brandingColumns are a brandingRow's, of organizations o and logos lg.
const brandingColumns = `o.name AS organization, o.display_name, o.logo_sha256, lg.width AS logo_width,
	lg.height AS logo_height, o.accent_color, o.support_email, o.support_phone, o.payment_terms_days, o.invoice_footer`

type brandingRow struct {
	Organization     string         `db:"organization"`
	DisplayName      sql.NullString `db:"display_name"`
	LogoSHA256       sql.NullString `db:"logo_sha256"`
	LogoWidth        sql.NullInt64  `db:"logo_width"`
	LogoHeight       sql.NullInt64  `db:"logo_height"`
	AccentColor      sql.NullString `db:"accent_color"`
	SupportEmail     sql.NullString `db:"support_email"`
	SupportPhone     sql.NullString `db:"support_phone"`
	PaymentTermsDays *int           `db:"payment_terms_days"`
	InvoiceFooter    sql.NullString `db:"invoice_footer"`
}

func (r brandingRow) branding() Branding {
	b := Branding{Organization: r.Organization, DisplayName: r.DisplayName.String, AccentColor: r.AccentColor.String,
		SupportEmail: r.SupportEmail.String, SupportPhone: r.SupportPhone.String, PaymentTermsDays: r.PaymentTermsDays,
		InvoiceFooter: r.InvoiceFooter.String}
	if r.LogoSHA256.Valid {
		b.Logo = &Logo{SHA256: r.LogoSHA256.String, Width: int(r.LogoWidth.Int64), Height: int(r.LogoHeight.Int64)}
	}
	return b
}

// LogoPNG is the logo of hash; ErrNoLogo when there is none.
func (d *Store) LogoPNG(ctx context.Context, hash string) ([]byte, error) {
	if !hashPattern.MatchString(hash) {
		return nil, ErrNoLogo
	}
	var b []byte
	err := d.DB.GetContext(ctx, &b, `SELECT png FROM logos WHERE sha256 = $1`, hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoLogo
	}
	if err != nil {
		return nil, fmt.Errorf("directory: unable to read logo: %w", err)
	}
	return b, nil
}

// ErrNoLogo: no logo has this hash.
var ErrNoLogo = rule.New(rule.NotFound, "", "Logo not found", "No logo has this address.")

var hashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Actor is who makes a change: the organization and the person the audit
// log names (nil: an operator at the command line, not logged).
type Actor struct {
	OrganizationID uuid.UUID
	Audit          *audit.Actor
}

func (a Actor) audit(ctx context.Context, tx *sqlx.Tx, action, detail string, at time.Time) error {
	if a.Audit == nil {
		return nil
	}
	return audit.Append(ctx, tx, audit.Entry{Organization: &a.OrganizationID, Actor: *a.Audit, Action: action, Detail: detail, At: at})
}

// BrandingChange is the business settings as a form sends them: every
// text as typed ("" unsets it), and the logo.
type BrandingChange struct {
	DisplayName      string
	AccentColor      string
	SupportEmail     string
	SupportPhone     string
	PaymentTermsDays string // whole days, or ""
	InvoiceFooter    string
	// Logo is a new logo's file as uploaded (nil: keep the logo);
	// RemoveLogo takes the logo away.
	Logo       []byte
	RemoveLogo bool
}

// SetBranding checks and keeps the organization's business settings,
// with an audit entry naming what changed, in one transaction, and
// returns them as kept. Refusals are Invalid, by field (displayName,
// logo, accentColor, supportEmail, supportPhone, paymentTermsDays,
// invoiceFooter), all at once; nothing is kept then.
func (d *Store) SetBranding(ctx context.Context, actor Actor, in BrandingChange) (Branding, error) {
	v := map[string][]string{}
	add := func(field, format string, args ...any) { v[field] = append(v[field], fmt.Sprintf(format, args...)) }
	in.DisplayName = strings.TrimSpace(in.DisplayName)
	if n := utf8.RuneCountInString(in.DisplayName); n > MaxNameLength {
		add("displayName", "The name may be at most %d characters long; this one is %d.", MaxNameLength, n)
	}
	color, problem := AccentColor(in.AccentColor)
	if problem != "" {
		add("accentColor", "%s", problem)
	}
	in.SupportEmail = strings.TrimSpace(in.SupportEmail)
	if in.SupportEmail != "" && !mailaddr.Valid(in.SupportEmail) {
		add("supportEmail", "Enter an email address such as billing@example.com.")
	}
	in.SupportPhone = strings.TrimSpace(in.SupportPhone)
	if msg := phoneProblem(in.SupportPhone); msg != "" {
		add("supportPhone", "%s", msg)
	}
	var terms *int
	if s := strings.TrimSpace(in.PaymentTermsDays); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > MaxPaymentDays {
			add("paymentTermsDays", "Enter a whole number of days from 0 to %d.", MaxPaymentDays)
		} else {
			terms = &n
		}
	}
	in.InvoiceFooter = strings.TrimSpace(strings.ReplaceAll(in.InvoiceFooter, "\r\n", "\n"))
	if n := utf8.RuneCountInString(in.InvoiceFooter); n > MaxFooter {
		add("invoiceFooter", "The footer may be at most %d characters long; this one is %d.", MaxFooter, n)
	}
	var logo *Logo
	if in.Logo != nil && !in.RemoveLogo {
		l, err := ReencodeLogo(ctx, in.Logo)
		if err != nil {
			if r := rule.As(err); r != nil && r.Field == "logo" {
				add("logo", "%s", r.Message)
			} else {
				return Branding{}, err
			}
		}
		logo = l
	}
	if len(v) > 0 {
		return Branding{}, rule.InvalidFields(v)
	}
	now := time.Now()
	err := postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		before, err := BrandingOf(ctx, tx, actor.OrganizationID)
		if err != nil {
			return err
		}
		hash := ""
		if before.Logo != nil && !in.RemoveLogo {
			hash = before.Logo.SHA256
		}
		if logo != nil {
			hash = logo.SHA256
			_, err := tx.ExecContext(ctx, `INSERT INTO logos (sha256, organization_id, png, width, height, created_at)
				VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (sha256) DO NOTHING`,
				logo.SHA256, actor.OrganizationID, logo.PNG, logo.Width, logo.Height, now)
			if err != nil {
				return fmt.Errorf("directory: unable to keep logo: %w", err)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE organizations SET display_name = NULLIF($2, ''), logo_sha256 = NULLIF($3, ''),
			accent_color = NULLIF($4, ''), support_email = NULLIF($5, ''), support_phone = NULLIF($6, ''),
			payment_terms_days = $7, invoice_footer = NULLIF($8, '') WHERE id = $1`,
			actor.OrganizationID, in.DisplayName, hash, color, in.SupportEmail, in.SupportPhone, terms, in.InvoiceFooter)
		if err != nil {
			return fmt.Errorf("directory: unable to keep branding: %w", err)
		}
		var changed []string
		note := func(what string, a, b any) {
			if fmt.Sprint(a) != fmt.Sprint(b) {
				changed = append(changed, what)
			}
		}
		beforeHash := ""
		if before.Logo != nil {
			beforeHash = before.Logo.SHA256
		}
		beforeTerms, afterTerms := "", ""
		if before.PaymentTermsDays != nil {
			beforeTerms = strconv.Itoa(*before.PaymentTermsDays)
		}
		if terms != nil {
			afterTerms = strconv.Itoa(*terms)
		}
		note("display name", before.DisplayName, in.DisplayName)
		note("logo", beforeHash, hash)
		note("accent colour", before.AccentColor, color)
		note("support email", before.SupportEmail, in.SupportEmail)
		note("support phone", before.SupportPhone, in.SupportPhone)
		note("payment terms", beforeTerms, afterTerms)
		note("invoice footer", before.InvoiceFooter, in.InvoiceFooter)
		if len(changed) == 0 {
			return nil // saved again unchanged: nothing to log
		}
		return actor.audit(ctx, tx, audit.BrandingChanged, strings.Join(changed, ", "), now)
	})
	if err != nil {
		return Branding{}, err
	}
	return BrandingOf(ctx, d.DB, actor.OrganizationID)
}

var colorPattern = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// AccentColor is s ("#1F5FBF") as kept: lower case; "" for "". A value
// that is not #RRGGBB, or whose contrast with white is below MinContrast,
// is refused: problem says why in a person's words (the ratio named, to
// one decimal, never rounded up to the minimum).
func AccentColor(s string) (color, problem string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", ""
	}
	if !colorPattern.MatchString(s) {
		return "", "Enter a colour as # and six hexadecimal digits, such as #1f5fbf."
	}
	s = strings.ToLower(s)
	if r := ContrastWithWhite(s); r < MinContrast {
		return "", fmt.Sprintf("This colour's contrast with white is %s:1; it must be at least %.1f:1, so that white text on it "+
			"and it on white can be read. Choose a darker colour.", strconv.FormatFloat(math.Floor(r*10)/10, 'f', 1, 64), MinContrast)
	}
	return s, ""
}

// ContrastWithWhite is the WCAG 2 contrast ratio of the colour "#rrggbb"
// with white: 1 (white) to 21 (black).
func ContrastWithWhite(color string) float64 {
	c, _ := hex.DecodeString(strings.TrimPrefix(color, "#"))
	if len(c) != 3 {
		return 1
	}
	channel := func(b byte) float64 {
		s := float64(b) / 255
		if s <= 0.04045 {
			return s / 12.92
		}
		return math.Pow((s+0.055)/1.055, 2.4)
	}
	l := 0.2126*channel(c[0]) + 0.7152*channel(c[1]) + 0.0722*channel(c[2])
	return 1.05 / (l + 0.05)
}

// phoneProblem is what is wrong with a phone number as typed, or "": up
// to 40 characters of digits, spaces, + ( ) - . and at least 7 digits.
func phoneProblem(s string) string {
	if s == "" {
		return ""
	}
	digits := 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case strings.ContainsRune(" +()-.", r):
		default:
			return "Enter a phone number of digits, spaces and + ( ) - . only, such as (512) 555-0100."
		}
	}
	if digits < 7 || len(s) > 40 {
		return "Enter a phone number of 7 to 40 characters, such as (512) 555-0100."
	}
	return ""
}

// decoding is a turn to decode a logo: a 4000 × 4000 image takes up to
// 128 MB decoded, so logos are decoded one at a time.
var decoding = make(chan struct{}, 1)

// ReencodeLogo reads an uploaded logo and re-encodes it as kept. Only PNG
// and JPEG, told apart by their first bytes (never by a file name), of at
// most MaxLogoBytes and MaxLogoSide pixels each way, are taken: the size is
// read from the header before any pixel is decoded, so a small file that
// claims to be huge (a decompression bomb) is refused without allocating
// it. The image is scaled down to LogoWidth pixels wide when wider and
// written anew as PNG, which keeps only pixels: text chunks, EXIF and
// anything else riding in the file are gone. Refusals concern the field
// "logo".
func ReencodeLogo(ctx context.Context, data []byte) (*Logo, error) {
	refuse := func(format string, args ...any) error {
		return rule.Newf(rule.Invalid, "logo", "Logo not taken", format, args...)
	}
	if len(data) > MaxLogoBytes {
		return nil, refuse("The logo is %.1f MB; it may be at most 1 MB.", float64(len(data))/(1<<20))
	}
	var decodeConfig func([]byte) (image.Config, error)
	var decode func([]byte) (image.Image, error)
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		decodeConfig = func(b []byte) (image.Config, error) { return png.DecodeConfig(bytes.NewReader(b)) }
		decode = func(b []byte) (image.Image, error) { return png.Decode(bytes.NewReader(b)) }
	case bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}):
		decodeConfig = func(b []byte) (image.Config, error) { return jpeg.DecodeConfig(bytes.NewReader(b)) }
		decode = func(b []byte) (image.Image, error) { return jpeg.Decode(bytes.NewReader(b)) }
	default:
		return nil, refuse("The logo must be a PNG or JPEG image; this file is neither.")
	}
	cfg, err := decodeConfig(data)
	if err != nil {
		return nil, refuse("This PNG or JPEG file could not be read: it is damaged or incomplete.")
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > MaxLogoSide || cfg.Height > MaxLogoSide {
		return nil, refuse("The logo is %d × %d pixels; it may be at most %d × %d.", cfg.Width, cfg.Height, MaxLogoSide, MaxLogoSide)
	}
	select {
	case decoding <- struct{}{}:
		defer func() { <-decoding }()
	case <-ctx.Done():
		return nil, fmt.Errorf("directory: no turn to decode a logo: %w", ctx.Err())
	}
	img, err := decode(data)
	if err != nil {
		return nil, refuse("This PNG or JPEG file could not be read: it is damaged or incomplete.")
	}
	// Always 8-bit RGBA (RGB when opaque), which every reader of PNG
	// takes, the PDFs' among them.
	b := img.Bounds()
	var kept *image.NRGBA
	if b.Dx() > LogoWidth {
		h := max(1, int(math.Round(float64(b.Dy())*LogoWidth/float64(b.Dx()))))
		kept = image.NewNRGBA(image.Rect(0, 0, LogoWidth, h))
		draw.CatmullRom.Scale(kept, kept.Bounds(), img, b, draw.Src, nil)
	} else {
		kept = image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
		draw.Draw(kept, kept.Bounds(), img, b.Min, draw.Src)
	}
	var out bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, kept); err != nil {
		return nil, fmt.Errorf("directory: unable to encode logo: %w", err)
	}
	sum := sha256.Sum256(out.Bytes())
	return &Logo{SHA256: hex.EncodeToString(sum[:]), Width: kept.Bounds().Dx(), Height: kept.Bounds().Dy(), PNG: out.Bytes()}, nil
}

// LocationChange is what a location's page changes: what customers see
// of it, as typed ("" unsets an optional one).
type LocationChange struct {
	ReceiptName, AddressLine1, AddressLine2, City, State, PostalCode, Phone, Email string
}

// SetLocationDetails checks and keeps the receipt name, address, phone
// and email of the organization's location id, with an audit entry
// naming what changed, in one transaction. Another organization's
// location is ErrNotFound; refusals of values are Invalid, by field
// (receiptName, addressLine1, addressLine2, city, state, postalCode,
// phone, email), all at once.
func (d *Store) SetLocationDetails(ctx context.Context, actor Actor, id uuid.UUID, in LocationChange) (Location, error) {
	v := map[string][]string{}
	fields := []struct {
		name, words string
		value       *string
		required    bool
	}{
		{"receiptName", "The receipt name", &in.ReceiptName, false},
		{"addressLine1", "The address", &in.AddressLine1, true},
		{"addressLine2", "The second address line", &in.AddressLine2, false},
		{"city", "The city", &in.City, true},
		{"state", "The state", &in.State, true},
		{"postalCode", "The postal code", &in.PostalCode, true},
	}
	for _, f := range fields {
		*f.value = strings.TrimSpace(*f.value)
		n := utf8.RuneCountInString(*f.value)
		switch {
		case f.required && n == 0:
			v[f.name] = append(v[f.name], f.words+" is required.")
		case n > MaxNameLength:
			v[f.name] = append(v[f.name], fmt.Sprintf("%s may be at most %d characters long; this one is %d.", f.words, MaxNameLength, n))
		}
	}
	in.Phone, in.Email = strings.TrimSpace(in.Phone), strings.TrimSpace(in.Email)
	if msg := phoneProblem(in.Phone); msg != "" {
		v["phone"] = append(v["phone"], msg)
	}
	if in.Email != "" && !mailaddr.Valid(in.Email) {
		v["email"] = append(v["email"], "Enter an email address such as store@example.com.")
	}
	if len(v) > 0 {
		return Location{}, rule.InvalidFields(v)
	}
	var l Location
	err := postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		var before Location
		err := tx.GetContext(ctx, &before, `SELECT `+locationColumns+` FROM locations
			WHERE organization_id = $1 AND id = $2 FOR UPDATE`, actor.OrganizationID, id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("directory: unable to read location: %w", err)
		}
		now := time.Now()
		err = tx.GetContext(ctx, &l, `UPDATE locations SET receipt_name = NULLIF($3, ''), address_line1 = $4,
			address_line2 = NULLIF($5, ''), city = $6, state = $7, postal_code = $8, phone = NULLIF($9, ''),
			email = NULLIF($10, ''), updated_at = $11
			WHERE organization_id = $1 AND id = $2 RETURNING `+locationColumns,
			actor.OrganizationID, id, in.ReceiptName, in.AddressLine1, in.AddressLine2, in.City, in.State, in.PostalCode,
			in.Phone, in.Email, now)
		if err != nil {
			return fmt.Errorf("directory: unable to keep location: %w", err)
		}
		var changed []string
		for _, c := range []struct {
			what    string
			was, is string
		}{
			{"receipt name", optional.Value(before.ReceiptName), in.ReceiptName},
			{"address", strings.Join([]string{before.AddressLine1, optional.Value(before.AddressLine2), before.City, before.State, before.PostalCode}, "\x00"),
				strings.Join([]string{in.AddressLine1, in.AddressLine2, in.City, in.State, in.PostalCode}, "\x00")},
			{"phone", optional.Value(before.Phone), in.Phone},
			{"email", optional.Value(before.Email), in.Email},
		} {
			if c.was != c.is {
				changed = append(changed, c.what)
			}
		}
		if len(changed) == 0 {
			return nil
		}
		return actor.audit(ctx, tx, audit.LocationChanged, before.Name+" ("+id.String()+"): "+strings.Join(changed, ", "), now)
	})
	return l, err
}
