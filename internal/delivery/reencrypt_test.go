package delivery

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/vault"
)

// A notice waiting in the outbox when the encryption key is rotated is
// re-sealed under the new key, which alone then opens it with its words
// intact; a second run re-seals nothing.
func TestReencryptNotices(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	oldFile, _ := vault.GenerateKeyFile()
	newFile, _ := vault.GenerateKeyFile()
	oldVault, err := vault.New(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	n := Notice{To: "sam@example.com", Subject: "Reset your password", Text: "https://payreq.test/portal/password-reset/secret-token"}
	if err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		return EnqueueNotice(ctx, tx, oldVault, nil, n, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	both, err := vault.New(append(append([]byte{}, newFile...), oldFile...))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReencryptNotices(ctx, db, both, both.Current()); err != nil || got != 1 {
		t.Fatalf("re-sealed %d (%v), want the one notice", got, err)
	}
	if again, err := ReencryptNotices(ctx, db, both, both.Current()); err != nil || again != 0 {
		t.Errorf("a second run re-sealed %d (%v), want 0", again, err)
	}
	newOnly, err := vault.New(newFile)
	if err != nil {
		t.Fatal(err)
	}
	var row struct {
		ID     string `db:"id"`
		Notice []byte `db:"notice"`
		Key    string `db:"notice_key_id"`
	}
	if err := db.Get(&row, `SELECT id, notice, notice_key_id FROM outbox WHERE notice IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	plain, err := newOnly.Open(row.Notice, row.Key, "outbox:"+row.ID+":notice")
	if err != nil {
		t.Fatalf("the notice with the new key alone: %v", err)
	}
	var got Notice
	if err := json.Unmarshal([]byte(plain), &got); err != nil || got != n {
		t.Errorf("the notice re-sealed reads %+v (%v), want %+v", got, err, n)
	}
}
