package portal_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

// twoFactorOn sets up a second factor for c's member and answers a code
// not accepted at the test clock's time (nor one step either side).
func twoFactorOn(t *testing.T, env *apitest.Env, c *portaltest.Client) (wrong string) {
	t.Helper()
	setup := c.Get("/portal/account/two-factor").Want(t, http.StatusOK)
	secret := between(setup.Body, `id="secret">`, "<")
	code := func(at time.Time) string {
		s, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c.Post("/portal/account/two-factor", setup.CSRF(t), url.Values{"code": {code(env.Clock.Now())}}).Want(t, http.StatusOK)
	now := env.Clock.Now()
	for _, w := range []string{"000000", "111111", "222222"} {
		if w != code(now) && w != code(now.Add(-30*time.Second)) && w != code(now.Add(30*time.Second)) {
			return w
		}
	}
	t.Fatal("no wrong code found")
	return ""
}

// The second factor cannot be guessed by signing in again between
// guesses: "password, 4 wrong codes" twice pauses the second step at the
// fifth wrong code (429, even for the right code, and the person is
// emailed); a right password lowers neither that count nor what the
// address limit counts; and only a sign-in through both steps clears the
// email's password failures.
func TestSecondFactorFailuresPausePerson(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	mail := portaltest.StartMailbox(t, env)
	owner, m := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Owner", auth.PaymentsView)
	wrong := twoFactorOn(t, env, owner)
	failures := func(address string) int {
		var n int
		if err := env.App.DB.Get(&n, `SELECT count(*) FROM sign_in_failures WHERE address = $1`, address); err != nil {
			t.Fatal(err)
		}
		return n
	}

	attacker := portaltest.NewClient(t, env)
	guess := func() portaltest.Page {
		step := attacker.Get("/portal/sign-in/two-factor")
		return attacker.Post("/portal/sign-in/two-factor", step.CSRF(t), url.Values{"code": {wrong}})
	}
	attacker.SignIn(m.Email, m.Password).WantRedirect(t, "/portal/sign-in/two-factor")
	for range 4 {
		guess().Want(t, http.StatusUnauthorized)
	}
	attacker.SignIn(m.Email, m.Password).WantRedirect(t, "/portal/sign-in/two-factor")
	if n := failures(attacker.Address); n != 4 {
		t.Fatalf("after a right password the address's failures are %d, want the 4 it had", n)
	}
	guess().Want(t, http.StatusUnauthorized) // the fifth
	paused := guess().Want(t, http.StatusTooManyRequests).Has(t, "paused", "Try again in 15 minutes")
	if paused.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	attacker.SignIn(m.Email, m.Password).WantRedirect(t, "/portal/sign-in/two-factor")
	guess().Want(t, http.StatusTooManyRequests)
	if n := failures(attacker.Address); n != 5 {
		t.Errorf("the address's failures are %d, want 5", n)
	}
	if notice := mail.Wait(m.Email, "paused"); !strings.Contains(notice.Text, "second-factor codes") {
		t.Errorf("the notice does not say the codes were wrong:\n%s", notice.Text)
	}

	// After the pause: 4 wrong passwords, a right one (the second step
	// not given), and the fifth wrong password locks the email.
	env.Clock.Advance(16 * time.Minute)
	other := portaltest.NewClient(t, env)
	for range 4 {
		other.SignIn(m.Email, "not the password at all").Want(t, http.StatusUnauthorized)
	}
	other.SignIn(m.Email, m.Password).WantRedirect(t, "/portal/sign-in/two-factor")
	other.SignIn(m.Email, "not the password at all").Want(t, http.StatusUnauthorized)
	other.SignIn(m.Email, m.Password).Want(t, http.StatusTooManyRequests)
}

// A browser that signed in before keeps signing in through a flood: its
// email is locked by guesses and anonymous sign-ins from many addresses
// fill the shared hashing slots, while its device cookie passes the lock
// and has the reserved slots: at least 9 of its 10 sign-ins succeed. The
// cookie is HttpOnly, SameSite=Lax, a year long.
func TestDeviceCookieThroughFlood(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	m := portaltest.NewMember(t, env, seed.Merchant.OrganizationID, "Member", auth.PaymentsView)
	browser := portaltest.NewClient(t, env)
	ck := browser.SignIn(m.Email, m.Password).WantRedirect(t, "/portal/").Header.Values("Set-Cookie")
	device := ""
	for _, v := range ck {
		if strings.HasPrefix(v, "payreq_device=") {
			device = v
		}
	}
	for _, want := range []string{"Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=31536000"} {
		if !strings.Contains(device, want) {
			t.Errorf("device cookie %q lacks %s (cookies: %q)", device, want, ck)
		}
	}

	guesser := portaltest.NewClient(t, env)
	for range 5 {
		guesser.SignIn(m.Email, "a guess of the password").Want(t, http.StatusUnauthorized)
	}
	portaltest.NewClient(t, env).SignIn(m.Email, m.Password).Want(t, http.StatusTooManyRequests)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// A new address each time: no per-address limit holds it.
				p := portaltest.NewClient(t, env).SignIn(fmt.Sprintf("flood-%s@example.com", uuid.NewString()[:8]), "a guess of the password")
				mu.Lock()
				statuses[p.Status]++
				mu.Unlock()
			}
		}()
	}
	defer wg.Wait()
	defer close(stop)
	ok := 0
	for range 10 {
		home := browser.Get("/portal/").Want(t, http.StatusOK)
		browser.Post("/portal/sign-out", home.CSRF(t), nil).WantRedirect(t, "/portal/sign-in")
		if p := browser.SignIn(m.Email, m.Password); p.Status == http.StatusSeeOther && p.Location == "/portal/" {
			ok++
		} else {
			t.Logf("a sign-in with the device cookie: %d", p.Status)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("the flood's answers: %v", statuses)
	if statuses[http.StatusUnauthorized] < 10 {
		t.Errorf("the flood hashed little (%v): no flood", statuses)
	}
	if ok < 9 {
		t.Errorf("%d of 10 sign-ins with the device cookie succeeded, want at least 9", ok)
	}
}

// More than 30 sign-in POSTs in a minute from one address are refused,
// even right ones; a browser with its device cookie is not counted.
func TestSignInsPerAddress(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	m := portaltest.NewMember(t, env, seed.Merchant.OrganizationID, "Member", auth.PaymentsView)
	c := portaltest.NewClient(t, env)
	u, _ := url.Parse(env.URL)
	page := c.Get("/portal/sign-in")
	var device *http.Cookie
	for range 30 {
		p := c.Post("/portal/sign-in", page.CSRF(t), url.Values{"email": {m.Email}, "password": {m.Password}}).WantRedirect(t, "/portal/")
		for _, ck := range (&http.Response{Header: p.Header}).Cookies() {
			if ck.Name == "payreq_device" {
				device = ck
			}
		}
		// A script's sign-ins: no device cookie kept, nor the session (the
		// sign-in page's form token is bound to no session).
		c.HTTP.Jar.SetCookies(u, []*http.Cookie{{Name: "payreq_device", Value: "", Path: "/", MaxAge: -1},
			{Name: web.SessionCookie(false), Value: "", Path: "/", MaxAge: -1}})
	}
	c.Post("/portal/sign-in", page.CSRF(t), url.Values{"email": {m.Email}, "password": {m.Password}}).
		Want(t, http.StatusTooManyRequests).Has(t, "too many sign-ins from your network")
	if device == nil {
		t.Fatal("no device cookie was set")
	}
	c.HTTP.Jar.SetCookies(u, []*http.Cookie{{Name: device.Name, Value: device.Value, Path: "/"}})
	c.Post("/portal/sign-in", page.CSRF(t), url.Values{"email": {m.Email}, "password": {m.Password}}).WantRedirect(t, "/portal/")
}

// The per-address budget holds for every password check, not only
// sign-ins: 30 resets, invitation acceptances or password changes a
// minute from one address, right or wrong, then 429.
func TestPasswordChecksBudget(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	c, m := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Member")
	ctx := context.Background()
	sess, err := env.App.People.Session(ctx, sessionToken(t, env, c))
	if err != nil {
		t.Fatal(err)
	}
	for name, check := range map[string]func(address string) error{
		"reset": func(a string) error {
			return env.App.People.ResetPassword(ctx, "no such link", "a fine new password 42", a)
		},
		"invitation": func(a string) error {
			_, err := env.App.People.Accept(ctx, "no such invitation", "Someone", "a fine new password 42", a)
			return err
		},
		"password change": func(a string) error {
			return env.App.People.ChangePassword(ctx, sess, "", m.Password, "short", a)
		},
	} {
		address := apitest.SourceAddress()
		for i := range 30 {
			if r := rule.As(check(address)); r == nil || r.Kind == rule.Limited {
				t.Fatalf("%s %d: %v, want refused for its own reason", name, i+1, r)
			}
		}
		if r := rule.As(check(address)); r == nil || r.Kind != rule.Limited {
			t.Errorf("%s, the 31st in a minute: %v, want 429", name, r)
		}
	}
}

// sessionToken is the session cookie's value of c.
func sessionToken(t *testing.T, env *apitest.Env, c *portaltest.Client) string {
	t.Helper()
	u, _ := url.Parse(env.URL)
	for _, ck := range c.HTTP.Jar.Cookies(u) {
		if ck.Name == "payreq_session" {
			return ck.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}
