package people

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	qrcode "github.com/yeqown/go-qrcode/v2"

	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// TOTP as RFC 6238 and every authenticator app: SHA-1, 6 digits, 30 s,
// one step either side accepted, each code once.
var totpOptions = totp.ValidateOpts{Period: 30, Skew: 0, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// RecoveryCodes is how many one-use recovery codes a person gets.
const RecoveryCodes = 10

// TwoFactorSetup is what the setup page shows: the secret as base32 text
// and as a QR code (a PNG data: URI) of its otpauth:// URL.
type TwoFactorSetup struct {
	Secret string
	URL    string
	QR     string
}

func totpAAD(person uuid.UUID, what string) string { return "people:" + person.String() + ":" + what }

// BeginTwoFactor makes (or shows again) a pending TOTP secret for the
// person; it takes effect when ConfirmTwoFactor gets a code of it.
func (s *Store) BeginTwoFactor(ctx context.Context, p Person) (TwoFactorSetup, error) {
	var row struct {
		Sealed []byte  `db:"totp_pending"`
		KeyID  *string `db:"totp_pending_key_id"`
	}
	if err := s.DB.GetContext(ctx, &row, `SELECT totp_pending, totp_pending_key_id FROM people WHERE id = $1`, p.ID); err != nil {
		return TwoFactorSetup{}, fmt.Errorf("people: unable to read person: %w", err)
	}
	var secret string
	if row.KeyID != nil {
		plain, err := s.Vault.Open(row.Sealed, *row.KeyID, totpAAD(p.ID, "pending"))
		if err != nil {
			return TwoFactorSetup{}, err
		}
		secret = plain
	} else {
		key, err := totp.Generate(totp.GenerateOpts{Issuer: "payreq", AccountName: p.Email, Period: 30, Digits: otp.DigitsSix,
			Algorithm: otp.AlgorithmSHA1, Rand: rand.Reader})
		if err != nil {
			return TwoFactorSetup{}, fmt.Errorf("people: unable to make a TOTP secret: %w", err)
		}
		secret = key.Secret()
		sealed, keyID, err := s.Vault.Seal(secret, totpAAD(p.ID, "pending"))
		if err != nil {
			return TwoFactorSetup{}, err
		}
		if _, err := s.DB.ExecContext(ctx, `UPDATE people SET totp_pending = $2, totp_pending_key_id = $3 WHERE id = $1`, p.ID, sealed, keyID); err != nil {
			return TwoFactorSetup{}, fmt.Errorf("people: unable to keep the TOTP secret: %w", err)
		}
	}
	key, err := otp.NewKeyFromURL(fmt.Sprintf("otpauth://totp/payreq:%s?secret=%s&issuer=payreq&algorithm=SHA1&digits=6&period=30",
		strings.ReplaceAll(p.Email, " ", "%20"), secret))
	if err != nil {
		return TwoFactorSetup{}, fmt.Errorf("people: unable to make the otpauth URL: %w", err)
	}
	qr, err := qrPNG(key.URL())
	if err != nil {
		return TwoFactorSetup{}, err
	}
	return TwoFactorSetup{Secret: secret, URL: key.URL(), QR: qr}, nil
}

// ConfirmTwoFactor turns the pending secret on when code is one of its
// codes, and answers the recovery codes, shown this once.
func (s *Store) ConfirmTwoFactor(ctx context.Context, p Person, code, address string) ([]string, error) {
	var codes []string
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var row struct {
			Sealed []byte  `db:"totp_pending"`
			KeyID  *string `db:"totp_pending_key_id"`
			Had    bool    `db:"had"`
		}
		if err := tx.GetContext(ctx, &row, `SELECT totp_pending, totp_pending_key_id, totp_secret IS NOT NULL AS had
			FROM people WHERE id = $1 FOR UPDATE`, p.ID); err != nil {
			return err
		}
		if row.KeyID == nil {
			return rule.InvalidField("code", "Open this page again to get a new code to scan.")
		}
		secret, err := s.Vault.Open(row.Sealed, *row.KeyID, totpAAD(p.ID, "pending"))
		if err != nil {
			return err
		}
		step, ok := matchStep(secret, strings.TrimSpace(code), s.Now(), -1)
		if !ok {
			return rule.InvalidField("code", "This code is not right. Enter the 6 digits your app shows now.")
		}
		sealed, keyID, err := s.Vault.Seal(secret, totpAAD(p.ID, "secret"))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE people SET totp_secret = $2, totp_key_id = $3, totp_last_step = $4,
			totp_pending = NULL, totp_pending_key_id = NULL WHERE id = $1`, p.ID, sealed, keyID, step); err != nil {
			return err
		}
		if codes, err = s.newRecoveryCodes(ctx, tx, p.ID); err != nil {
			return err
		}
		orgs, err := s.orgsOf(ctx, tx, &p.ID)
		if err != nil {
			return err
		}
		for _, org := range orgs {
			if err := s.record(ctx, tx, &org, &p.ID, p.Email, ActionTwoFactorOn, "authenticator app and 10 recovery codes", address); err != nil {
				return err
			}
		}
		what := "A second factor (an authenticator app) was set up for your payreq account"
		if row.Had {
			what = "The second factor of your payreq account was replaced by another authenticator app, with new recovery codes"
		}
		return s.tellChanged(ctx, tx, p.Email, "Your payreq second factor was changed", what)
	})
	return codes, err
}

// SecondFactor completes a sign-in waiting for it, with a code of the
// person's authenticator app or one of their recovery codes (each works
// once). A wrong code counts against the person on its own (5 pause their
// second step) and against the address; a correct one clears the failures
// and answers a device token.
func (s *Store) SecondFactor(ctx context.Context, token, code, recovery, address string) (Session, error) {
	sess, err := s.Session(ctx, token)
	if err != nil {
		return Session{}, err
	}
	if !sess.AwaitingSecondFactor {
		return sess, nil
	}
	key := normalEmail(sess.Person.Email)
	if err := s.secondStepLimits(ctx, sess.Person.ID, address); err != nil {
		return Session{}, err
	}
	var ok bool
	action := ""
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		switch {
		case strings.TrimSpace(recovery) != "":
			used, err := s.useRecoveryCode(ctx, tx, sess.Person.ID, recovery)
			if err != nil {
				return err
			}
			ok, action = used, ActionRecoveryCodeUsed
		default:
			matched, err := s.currentCode(ctx, tx, sess.Person.ID, code)
			if err != nil {
				return err
			}
			ok = matched
		}
		if !ok {
			return nil
		}
		if err := s.clearFailures(ctx, tx, key, sess.Person.ID); err != nil {
			return err
		}
		orgs, err := s.orgsOf(ctx, tx, &sess.Person.ID)
		if err != nil {
			return err
		}
		var membership *uuid.UUID
		if len(orgs) == 1 {
			var id uuid.UUID
			if err := tx.GetContext(ctx, &id, `SELECT id FROM memberships WHERE person_id = $1 AND organization_id = $2 AND removed_at IS NULL`, sess.Person.ID, orgs[0]); err != nil {
				return err
			}
			membership = &id
		}
		// A new token for the signed-in session.
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE digest = $1`, digest(token)); err != nil {
			return err
		}
		next, err := s.newSession(ctx, tx, sess.Person.ID, membership, false)
		if err != nil {
			return err
		}
		next.Person = sess.Person
		sess = next
		for _, org := range orgs {
			if err := s.record(ctx, tx, &org, &sess.Person.ID, key, ActionSignedIn, "second factor given", address); err != nil {
				return err
			}
			if action != "" {
				if err := s.record(ctx, tx, &org, &sess.Person.ID, key, action, "", address); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return Session{}, err
	}
	if !ok {
		if err := s.secondFactorFailed(ctx, sess.Person, address); err != nil {
			return Session{}, err
		}
		field := "code"
		if strings.TrimSpace(recovery) != "" {
			field = "recoveryCode"
		}
		return Session{}, rule.InvalidField(field, "This code is not right, or it was used already.")
	}
	sess.Device = s.newDevice(sess.Person.ID)
	return sess, nil
}

// currentCode says whether code is a code of the person's authenticator
// app now, one not used before; it is then used.
func (s *Store) currentCode(ctx context.Context, tx *sqlx.Tx, person uuid.UUID, code string) (bool, error) {
	var row struct {
		Sealed []byte `db:"totp_secret"`
		KeyID  string `db:"totp_key_id"`
		Last   *int64 `db:"totp_last_step"`
	}
	if err := tx.GetContext(ctx, &row, `SELECT totp_secret, totp_key_id, totp_last_step FROM people WHERE id = $1 FOR UPDATE`, person); err != nil {
		return false, err
	}
	secret, err := s.Vault.Open(row.Sealed, row.KeyID, totpAAD(person, "secret"))
	if err != nil {
		return false, err
	}
	last := int64(-1)
	if row.Last != nil {
		last = *row.Last
	}
	step, matched := matchStep(secret, strings.TrimSpace(code), s.Now(), last)
	if matched {
		if _, err := tx.ExecContext(ctx, `UPDATE people SET totp_last_step = $2 WHERE id = $1`, person, step); err != nil {
			return false, err
		}
	}
	return matched, nil
}

// matchStep finds the time step (now, one before or one after) whose code
// is code, later than last.
func matchStep(secret, code string, now time.Time, last int64) (int64, bool) {
	if len(code) != 6 {
		return 0, false
	}
	step := now.Unix() / 30
	for _, st := range []int64{step - 1, step, step + 1} {
		if st <= last {
			continue
		}
		want, err := totp.GenerateCodeCustom(secret, time.Unix(st*30, 0), totpOptions)
		if err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return st, true
		}
	}
	return 0, false
}

// qrPNG draws text as a QR code, a PNG data: URI (the pages' policy
// allows images as data: URIs, nothing fetched).
func qrPNG(text string) (string, error) {
	qr, err := qrcode.NewWith(text, qrcode.WithErrorCorrectionLevel(qrcode.ErrorCorrectionMedium))
	if err != nil {
		return "", fmt.Errorf("people: unable to make the QR code: %w", err)
	}
	w := &pngWriter{}
	if err := qr.Save(w); err != nil {
		return "", fmt.Errorf("people: unable to draw the QR code: %w", err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(w.buf.Bytes()), nil
}

// pngWriter is a qrcode.Writer drawing 4 pixels a module with a quiet
// zone of 4 modules, black on white.
type pngWriter struct{ buf bytes.Buffer }

func (w *pngWriter) Write(mat qrcode.Matrix) error {
	const scale, quiet = 4, 4
	n := mat.Width()
	size := (n + 2*quiet) * scale
	img := image.NewPaletted(image.Rect(0, 0, size, size), color.Palette{color.White, color.Black})
	mat.Iterate(qrcode.IterDirection_ROW, func(x, y int, v qrcode.QRValue) {
		if !v.IsSet() {
			return
		}
		for dy := range scale {
			for dx := range scale {
				img.SetColorIndex((x+quiet)*scale+dx, (y+quiet)*scale+dy, 1)
			}
		}
	})
	return png.Encode(&w.buf, img)
}

func (w *pngWriter) Close() error { return nil }
