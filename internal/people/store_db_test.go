package people

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/vault"
)

const passphrase = "a long enough passphrase"

// newPeople is a store of people on a fresh organization of its own, its
// clock stopped. People are shared by the package's tests (an email
// is one person): each test uses emails of its own.
func newPeople(t *testing.T) (*Store, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, testDSN, postgres.Pool{})
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
	s := &Store{DB: db, Now: func() time.Time { return now }, Vault: v, Hasher: NewHasher(2),
		RecoveryKeys: [][]byte{[]byte("a recovery key")}, PublicURL: "https://pay.example",
		DeviceKey: []byte("a device key")}
	org := uuid.Must(uuid.NewV7())
	if _, err := db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Dana''s Bakery', 'merchant')`, org); err != nil {
		t.Fatal(err)
	}
	return s, org
}

// An added member signs in with their password, straight into their one
// organization, until they sign out; a wrong password or an unknown
// email is refused alike.
func TestSignInAndOut(t *testing.T) {
	s, org := newPeople(t)
	ctx := context.Background()
	if _, err := s.AddMember(ctx, org, "Dana", "dana@example.com", Owner, auth.PermissionsFor(auth.KindMerchant), passphrase); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ email, password string }{{"dana@example.com", "not the passphrase"}, {"nobody@example.com", passphrase}} {
		if _, err := s.SignIn(ctx, c.email, c.password, "192.0.2.1", ""); !errors.Is(err, ErrWrongCredentials) {
			t.Errorf("SignIn(%s, %s): %v, want ErrWrongCredentials", c.email, c.password, err)
		}
	}
	sess, err := s.SignIn(ctx, " Dana@Example.com ", passphrase, "192.0.2.1", "")
	if err != nil {
		t.Fatal(err)
	}
	if sess.AwaitingSecondFactor || sess.Membership == nil || sess.Device == "" {
		t.Errorf("session = %+v, want one in the organization, with a device token", sess)
	}
	got, err := s.Session(ctx, sess.Token)
	if err != nil {
		t.Fatal(err)
	}
	if got.Person.Email != "dana@example.com" || got.Membership.OrganizationID != org || got.Membership.Role != Owner {
		t.Errorf("read session = %+v in %+v, want Dana, Owner of the organization", got.Person, got.Membership)
	}
	if err := s.SignOut(ctx, sess.Token, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, sess.Token); !errors.Is(err, ErrNoSession) {
		t.Errorf("Session after sign-out: %v, want ErrNoSession", err)
	}
}

// An invitation makes a pending member who accepts with a name and a
// password and is then signed in; the link works once.
func TestInviteAndAccept(t *testing.T) {
	s, org := newPeople(t)
	ctx := context.Background()
	if _, err := s.Invite(ctx, Actor{}, org, NewMember{Email: "not an address", Role: Member}); !rule.Is(err, rule.Invalid) {
		t.Errorf("Invite of a bad address: %v, want Invalid", err)
	}
	inv, err := s.Invite(ctx, Actor{}, org, NewMember{Email: "sam@example.com", Role: Member, Permissions: []string{auth.PaymentsView}})
	if err != nil {
		t.Fatal(err)
	}
	token := inv.InvitationURL[strings.LastIndex(inv.InvitationURL, "/")+1:]
	if !strings.HasPrefix(inv.InvitationURL, "https://pay.example/portal/invitations/") || token == "" {
		t.Fatalf("invitation URL %q", inv.InvitationURL)
	}
	if _, err := s.Accept(ctx, token, "Sam", "short", "192.0.2.2"); !rule.Is(err, rule.Invalid) {
		t.Errorf("Accept with a weak password: %v, want Invalid", err)
	}
	sess, err := s.Accept(ctx, token, "Sam", passphrase, "192.0.2.2")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(ctx, sess.Token)
	if err != nil {
		t.Fatal(err)
	}
	if got.Person.Name != "Sam" || got.Membership == nil || got.Membership.ID != inv.MembershipID ||
		!slices.Equal(got.Membership.Permissions, []string{auth.PaymentsView}) || got.Membership.AcceptedAt == nil {
		t.Errorf("session after accepting = %+v, %+v; want Sam's accepted membership with payments.view", got.Person, got.Membership)
	}
	if _, err := s.Accept(ctx, token, "Sam", passphrase, "192.0.2.2"); err == nil {
		t.Error("the invitation was accepted twice")
	}
	if _, err := s.SignIn(ctx, "sam@example.com", passphrase, "192.0.2.2", ""); err != nil {
		t.Errorf("Sam signs in with the chosen password: %v", err)
	}
}

// The last Owner can be neither demoted nor removed; a removed member's
// sessions end, and the members listed no longer show them.
func TestMembersKeepAnOwner(t *testing.T) {
	s, org := newPeople(t)
	ctx := context.Background()
	merchant := auth.PermissionsFor(auth.KindMerchant)
	owner, err := s.AddMember(ctx, org, "Dana", "dana.owner@example.com", Owner, merchant, passphrase)
	if err != nil {
		t.Fatal(err)
	}
	sam, err := s.AddMember(ctx, org, "Sam", "sam.member@example.com", Member, []string{auth.PaymentsView}, passphrase)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ChangeMember(ctx, Actor{}, org, owner, Admin, merchant); !rule.Is(err, rule.Conflict) {
		t.Errorf("demoting the last Owner: %v, want Conflict", err)
	}
	if err := s.RemoveMember(ctx, Actor{}, org, owner); !rule.Is(err, rule.Conflict) {
		t.Errorf("removing the last Owner: %v, want Conflict", err)
	}
	m, err := s.Membership(ctx, sam)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveMember(ctx, Actor{Membership: &m}, org, owner); !rule.Is(err, rule.Forbidden) {
		t.Errorf("a Member removing the Owner: %v, want Forbidden", err)
	}

	sess, err := s.SignIn(ctx, "sam.member@example.com", passphrase, "192.0.2.3", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ChangeMember(ctx, Actor{}, org, sam, Owner, merchant); err != nil {
		t.Fatal(err)
	}
	if err := s.ChangeMember(ctx, Actor{}, org, owner, Admin, merchant); err != nil {
		t.Errorf("demoting an Owner once another is: %v", err)
	}
	if err := s.RemoveMember(ctx, Actor{}, org, owner); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Session(ctx, sess.Token); err != nil || got.Membership.Role != Owner {
		t.Errorf("Sam's session: %v, %+v; want it to go on, as an Owner now", err, got.Membership)
	}
	members, err := s.Members(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	var emails []string
	for _, m := range members {
		emails = append(emails, m.Email)
	}
	if !slices.Equal(emails, []string{"sam.member@example.com"}) {
		t.Errorf("members = %v, want sam.member@example.com alone", emails)
	}
	if err := s.RemoveMember(ctx, Actor{}, org, sam); !rule.Is(err, rule.Conflict) {
		t.Errorf("removing the Owner left: %v, want Conflict", err)
	}
}
