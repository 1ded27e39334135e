package people

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn"
	"github.com/trustelem/zxcvbn/match"
	"golang.org/x/crypto/argon2"

	"github.com/payreq/payreq/internal/rule"
)

// Password lengths, in characters (NIST SP 800-63B: at least 8, payreq asks 12).
const (
	MinPassword = 12
	MaxPassword = 128
)

// MinStrength is the least zxcvbn score a new password needs (0 to 4;
// 3: "safely unguessable", some 10^10 guesses).
const MinStrength = 3

// CheckPassword applies the rules of a new password to the person with
// email and name: 12 to 128 characters of any kind, not holding the
// email's local part, and scored at least MinStrength by zxcvbn with the
// email and the name as words an attacker tries first. It is refused as
// the field named field, saying why in plain words.
func CheckPassword(field, email, name, password string) *rule.Error {
	n := utf8.RuneCountInString(password)
	lower := strings.ToLower(password)
	local, _, _ := strings.Cut(strings.ToLower(email), "@")
	switch {
	case !utf8.ValidString(password):
		return rule.InvalidField(field, "Enter the password as text.")
	case n < MinPassword:
		return rule.InvalidField(field, fmt.Sprintf("Use at least %d characters (a few words make a good one).", MinPassword))
	case n > MaxPassword:
		return rule.InvalidField(field, fmt.Sprintf("Use at most %d characters.", MaxPassword))
	case len(local) >= 3 && strings.Contains(lower, local):
		return rule.InvalidField(field, "The password must not contain your email address's name. Choose another.")
	}
	r := zxcvbn.PasswordStrength(password, userInputs(email, name))
	if r.Score >= MinStrength {
		return nil
	}
	return rule.InvalidField(field, "This password is too easy to guess: "+weakness(r.Sequence)+" Choose another (a few uncommon words make a good one).")
}

// userInputs are the words of the person zxcvbn tries first: the email,
// its parts and the name's words.
func userInputs(email, name string) []string {
	words := []string{strings.ToLower(email), strings.ToLower(name)}
	split := func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }
	for _, w := range strings.FieldsFunc(strings.ToLower(email+" "+name), split) {
		if utf8.RuneCountInString(w) >= 3 {
			words = append(words, w)
		}
	}
	return words
}

// weakness says in plain words what made zxcvbn guess a password soon:
// the longest guessable part of it (as zxcvbn's own feedback chooses).
func weakness(seq []*match.Match) string {
	var worst *match.Match
	for _, m := range seq {
		if m.Pattern != "bruteforce" && (worst == nil || len(m.Token) > len(worst.Token)) {
			worst = m
		}
	}
	switch {
	case worst == nil:
		return "it is short for what it is made of."
	case worst.Pattern == "dictionary" && worst.DictionaryName == "user_inputs":
		return "it is made from your email or your name, which are tried first."
	case worst.Pattern == "dictionary" && worst.DictionaryName == "passwords":
		return "it is built on a common password, and changed letters or added digits do not hide it."
	case worst.Pattern == "dictionary":
		return "a single word or name, even with digits added, is guessed quickly."
	case worst.Pattern == "spatial":
		return "keys next to each other on the keyboard (like qwerty) are guessed quickly."
	case worst.Pattern == "repeat":
		return "repeated characters (like aaa or abcabc) are guessed quickly."
	case worst.Pattern == "sequence":
		return "sequences (like abc or 6543) are guessed quickly."
	case worst.Pattern == "date", worst.Pattern == "regex":
		return "dates and years are guessed quickly."
	}
	return "it is short for what it is made of."
}

// argon2id parameters (OWASP's first choice): 19 MiB, two passes, one lane.
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
)

// ErrBusy: no hashing slot came free within SlotWait; the request is
// answered 503 rather than queued longer, so a burst of password checks
// cannot exhaust memory.
var ErrBusy = errors.New("people: too many password checks at once")

// SlotWait is how long a password check waits for a hashing slot.
const SlotWait = 2 * time.Second

// Hasher bounds how many argon2id hashes run at once (each takes 19 MiB).
// Half of its slots are reserved to sign-ins carrying a device cookie of
// their email (decisions: "Device cookies"): a flood of anonymous checks
// fills only the other half, and people who signed in on this browser
// before still get in.
type Hasher struct {
	shared, reserved chan struct{}
	dummy            string
	once             sync.Once
}

// NewHasher allows n hashes at once, n/2 of them reserved; n ≤ 0 means
// 2 × GOMAXPROCS.
func NewHasher(n int) *Hasher {
	if n <= 0 {
		n = 2 * runtime.GOMAXPROCS(0)
	}
	return &Hasher{shared: make(chan struct{}, n-n/2), reserved: make(chan struct{}, n/2)}
}

// acquire waits up to SlotWait for a slot: a shared one, or for a
// trusted check (a device cookie's) a reserved one too. It answers the
// slot's channel, to release.
func (h *Hasher) acquire(trusted bool) (chan struct{}, error) {
	reserved := h.reserved
	if !trusted {
		reserved = nil // never ready
	}
	t := time.NewTimer(SlotWait)
	defer t.Stop()
	select {
	case h.shared <- struct{}{}:
		return h.shared, nil
	case reserved <- struct{}{}:
		return reserved, nil
	case <-t.C:
		return nil, ErrBusy
	}
}

// Hash is a password's argon2id hash in the PHC string form.
func (h *Hasher) Hash(password string) (string, error) {
	slot, err := h.acquire(false)
	if err != nil {
		return "", err
	}
	defer func() { <-slot }()
	return hashPassword(password), nil
}

func hashPassword(password string) string {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		panic(fmt.Sprintf("people: crypto/rand failed: %v", err))
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding.EncodeToString
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads, b64(salt), b64(key))
}

// Verify reports whether password matches hash. An empty hash (no such
// person, or no password yet) is checked against a dummy hash, so that
// the answer takes the same work either way.
func (h *Hasher) Verify(hash, password string) (bool, error) { return h.verify(hash, password, false) }

// verify is Verify in a shared slot, or for a trusted check (a sign-in
// carrying a device cookie of its email) in any slot.
func (h *Hasher) verify(hash, password string, trusted bool) (bool, error) {
	slot, err := h.acquire(trusted)
	if err != nil {
		return false, err
	}
	defer func() { <-slot }()
	if hash == "" {
		h.once.Do(func() { h.dummy = hashPassword("payreq dummy password") })
		verifyPassword(h.dummy, password)
		return false, nil
	}
	return verifyPassword(hash, password), nil
}

func verifyPassword(hash, password string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	key, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1
}
