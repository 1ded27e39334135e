package people

import (
	"context"
	"crypto/sha256"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/vault"
)

// Recovery codes (issue 36, item 16) carry 80 random bits (16 symbols of
// a 32-symbol alphabet), are kept as HMAC-SHA-256 under the pepper's key
// (not a plain SHA-256 a database copy can be searched against), and work
// once each. A code made before (unsalted SHA-256) still works, once.
func TestRecoveryCodes(t *testing.T) {
	ctx := context.Background()
	// A database of its own: the key rotation's test re-seals every
	// second factor of the package's database with its own vault.
	db, err := postgres.Open(ctx, pgtest.NewDatabase(t), postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	file, _ := vault.GenerateKeyFile()
	v, err := vault.New(file)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	key := []byte("the recovery key under the pepper")
	s := &Store{DB: db, Now: func() time.Time { return now }, Vault: v, Hasher: NewHasher(2), RecoveryKeys: [][]byte{key}}
	org := uuid.Must(uuid.NewV7())
	if _, err := db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Recovering Co', 'merchant')`, org); err != nil {
		t.Fatal(err)
	}
	const email, password = "recovering@example.com", "a long enough passphrase"
	if _, err := s.AddMember(ctx, org, "Rae", email, Owner, auth.PermissionsFor(auth.KindMerchant), password); err != nil {
		t.Fatal(err)
	}
	var p Person
	if err := db.Get(&p, `SELECT id, email, name, false AS two_factor FROM people WHERE email = $1`, email); err != nil {
		t.Fatal(err)
	}
	setup, err := s.BeginTwoFactor(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	code, err := totp.GenerateCodeCustom(setup.Secret, now, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	codes, err := s.ConfirmTwoFactor(ctx, p, code, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	shape := regexp.MustCompile(`^[0-9a-hjkmnp-tv-z]{4}(-[0-9a-hjkmnp-tv-z]{4}){3}$`)
	if len(recoveryAlphabet) != 32 || len(codes) != RecoveryCodes {
		t.Fatalf("alphabet of %d, %d codes", len(recoveryAlphabet), len(codes))
	}
	for _, c := range codes {
		if !shape.MatchString(c) {
			t.Errorf("code %q is not 16 symbols of the alphabet (80 bits)", c)
		}
	}
	var stored [][]byte
	if err := db.Select(&stored, `SELECT digest FROM recovery_codes WHERE person_id = $1 AND scheme = 'hmac'`, p.ID); err != nil {
		t.Fatal(err)
	}
	plain := sha256.Sum256([]byte(normalCode(codes[0])))
	found := false
	for _, d := range stored {
		found = found || string(d) == string(recoveryMAC(key, codes[0]))
		if string(d) == string(plain[:]) {
			t.Error("a code is stored as its plain SHA-256")
		}
	}
	if len(stored) != RecoveryCodes || !found {
		t.Fatalf("%d codes stored under the HMAC, the first among them: %v", len(stored), found)
	}

	second := func(recovery string) error {
		t.Helper()
		sess, err := s.SignIn(ctx, email, password, "192.0.2.1", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.SecondFactor(ctx, sess.Token, "", recovery, "192.0.2.1")
		return err
	}
	if err := second(codes[0]); err != nil {
		t.Fatalf("a new recovery code: %v", err)
	}
	if err := second(codes[0]); err == nil {
		t.Fatal("a recovery code worked twice")
	}
	// Typed as a person reads it: upper case, spaces, o for 0.
	typed := []byte(codes[1])
	for i, ch := range typed {
		if ch == '0' {
			typed[i] = 'O'
		}
	}
	if err := second(string(typed)); err != nil {
		t.Fatalf("a code typed in capitals with O for 0: %v", err)
	}

	// A code of the old kind, kept before the pepper keyed them.
	old := sha256.Sum256([]byte("abcde23456"))
	if _, err := db.Exec(`INSERT INTO recovery_codes (person_id, digest, scheme) VALUES ($1, $2, 'sha256')`, p.ID, old[:]); err != nil {
		t.Fatal(err)
	}
	if err := second("abcde-23456"); err != nil {
		t.Fatalf("an old recovery code: %v", err)
	}
	if err := second("abcde-23456"); err == nil {
		t.Fatal("an old recovery code worked twice")
	}
}
