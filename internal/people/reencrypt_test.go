package people

import (
	"context"
	"os"
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

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// A key rotation re-seals every second factor, set up and pending, under
// the new key: the new key alone then opens them, a code of the secret
// still signs in, and a second run re-seals nothing.
func TestReencryptSecondFactors(t *testing.T) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, testDSN, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	oldFile, _ := vault.GenerateKeyFile()
	newFile, _ := vault.GenerateKeyFile()
	oldVault, err := vault.New(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := &Store{DB: db, Now: func() time.Time { return now }, Vault: oldVault, Hasher: NewHasher(2), RecoveryKeys: [][]byte{[]byte("a recovery key")}}
	org := uuid.Must(uuid.NewV7())
	if _, err := db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Rotating Co', 'merchant')`, org); err != nil {
		t.Fatal(err)
	}
	person := func(email string) Person {
		t.Helper()
		if _, err := s.AddMember(ctx, org, "Sam", email, Owner, auth.PermissionsFor(auth.KindMerchant), "a long enough passphrase"); err != nil {
			t.Fatal(err)
		}
		var p Person
		if err := db.Get(&p, `SELECT id, email, name, false AS two_factor FROM people WHERE email = $1`, email); err != nil {
			t.Fatal(err)
		}
		return p
	}
	confirmed, pending := person("confirmed@example.com"), person("pending@example.com")
	setup, err := s.BeginTwoFactor(ctx, confirmed)
	if err != nil {
		t.Fatal(err)
	}
	code, err := totp.GenerateCodeCustom(setup.Secret, now, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfirmTwoFactor(ctx, confirmed, code, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginTwoFactor(ctx, pending); err != nil {
		t.Fatal(err)
	}

	both, err := vault.New(append(append([]byte{}, newFile...), oldFile...))
	if err != nil {
		t.Fatal(err)
	}
	s.Vault = both
	n, err := s.Reencrypt(ctx, both.Current())
	if err != nil || n != 2 {
		t.Fatalf("re-sealed %d (%v), want the confirmed secret and the pending one", n, err)
	}
	if again, err := s.Reencrypt(ctx, both.Current()); err != nil || again != 0 {
		t.Errorf("a second run re-sealed %d (%v), want 0", again, err)
	}

	newOnly, err := vault.New(newFile)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		ID         uuid.UUID `db:"id"`
		Secret     []byte    `db:"totp_secret"`
		SecretKey  *string   `db:"totp_key_id"`
		Pending    []byte    `db:"totp_pending"`
		PendingKey *string   `db:"totp_pending_key_id"`
	}
	if err := db.Select(&rows, `SELECT id, totp_secret, totp_key_id, totp_pending, totp_pending_key_id FROM people
		WHERE id IN ($1, $2)`, confirmed.ID, pending.ID); err != nil {
		t.Fatal(err)
	}
	opened := 0
	for _, r := range rows {
		if r.SecretKey != nil {
			got, err := newOnly.Open(r.Secret, *r.SecretKey, totpAAD(r.ID, "secret"))
			if err != nil || got != setup.Secret {
				t.Errorf("the confirmed secret with the new key alone: %v", err)
			}
			opened++
		}
		if r.PendingKey != nil {
			if _, err := newOnly.Open(r.Pending, *r.PendingKey, totpAAD(r.ID, "pending")); err != nil {
				t.Errorf("the pending secret with the new key alone: %v", err)
			}
			opened++
		}
	}
	if opened != 2 {
		t.Errorf("opened %d sealed secrets, want 2", opened)
	}
}
