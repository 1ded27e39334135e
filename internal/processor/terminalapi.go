package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// TerminalAPI is a client of CardPointe's Integrated Terminal API
// (https://KEY@host/api/v2: the key is sent as the Authorization header),
// with the gateway's inquireByOrderid for answers that were lost. A
// terminal's session key (connect's X-CardConnect-SessionKey) is reused
// until shortly before it expires. It is safe for concurrent use.
type TerminalAPI struct {
	// AuthTimeout bounds authCard, which waits for the customer; Timeout
	// every other call.
	AuthTimeout time.Duration
	Timeout     time.Duration
	Now         func() time.Time

	gateway *CardPointe
	base    string
	key     string
	http    *http.Client

	mu       sync.Mutex
	sessions map[string]terminalSession // by merchant id and HSN
}

type terminalSession struct {
	key     string
	expires time.Time
}

var _ Terminals = (*TerminalAPI)(nil)

// TerminalAuthTimeout is authCard's deadline: a customer may take minutes
// at the terminal.
const TerminalAuthTimeout = 180 * time.Second

// sessionMargin: a session key this close to its expiry is renewed first.
const sessionMargin = 30 * time.Second

// NewTerminalAPI returns a client for the Integrated Terminal API at
// rawURL, whose userinfo holds the API key, and the gateway (for
// inquireByOrderid). A nil httpClient means a default one.
func NewTerminalAPI(rawURL string, gateway *CardPointe, httpClient *http.Client) (*TerminalAPI, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("terminal api: the URL does not parse")
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User == nil || u.User.Username() == "" {
		return nil, errors.New("terminal api: the URL must be http(s)://KEY@host/api/v2")
	}
	if gateway == nil {
		return nil, errors.New("terminal api: the gateway (PAYREQ_CARDPOINTE_URL) is needed for inquireByOrderid")
	}
	key := u.User.Username()
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	client := http.Client{}
	if httpClient != nil {
		client = *httpClient
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &TerminalAPI{
		AuthTimeout: TerminalAuthTimeout,
		Timeout:     10 * time.Second,
		Now:         time.Now,
		gateway:     gateway,
		base:        strings.TrimRight(u.String(), "/"),
		key:         key,
		http:        &client,
		sessions:    map[string]terminalSession{},
	}, nil
}

// terminalAnswer is an error answer of the Integrated Terminal API.
type terminalAnswer struct {
	ErrorCode    int    `json:"errorCode"`
	ErrorMessage string `json:"errorMessage"`
}

// errSession: the session key was refused (HTTP 401); a new one is asked for.
var errSession = errors.New("session key refused")

// post sends one request to the terminal API and decodes a 2xx answer into
// out; it returns the answer's headers. A non-2xx answer is an error:
// errSession, the terminal's errorCode mapped (terminalError), or
// ErrProcessorError.
func (t *TerminalAPI) post(ctx context.Context, path, session string, body, out any) (http.Header, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, errors.New("encode request")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("build POST %s request", path)
	}
	req.Header.Set("Authorization", t.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if session != "" {
		req.Header.Set("X-CardConnect-SessionKey", session)
	}
	res, err := t.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, transportError(err))
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("POST %s: read answer: %w", path, transportError(err))
	}
	if res.StatusCode == http.StatusUnauthorized {
		return nil, fmt.Errorf("POST %s: %w", path, errSession)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		var a terminalAnswer
		if json.Unmarshal(raw, &a) == nil && a.ErrorCode != 0 {
			return nil, fmt.Errorf("POST %s: %w", path, terminalError(a))
		}
		return nil, fmt.Errorf("POST %s: %w: HTTP %d", path, ErrProcessorError, res.StatusCode)
	}
	if out != nil && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("POST %s: %w: answer is not JSON of the expected shape", path, ErrProcessorError)
		}
	}
	return res.Header, nil
}

// terminalError is an errorCode's meaning.
func terminalError(a terminalAnswer) error {
	switch a.ErrorCode {
	case 1:
		return ErrTerminalTimedOut
	case 7:
		return ErrTerminalBusy
	case 8:
		return ErrTerminalCancelled
	}
	return &terminalCodeError{a}
}

// terminalCodeError is an errorCode with no meaning of its own here.
type terminalCodeError struct{ a terminalAnswer }

func (e *terminalCodeError) Error() string {
	return fmt.Sprintf("%v: errorCode %d: %s", ErrProcessorError, e.a.ErrorCode, strings.TrimSpace(e.a.ErrorMessage))
}

func (e *terminalCodeError) Unwrap() error { return ErrProcessorError }

// session is the terminal's session key: the one kept, or a new one from
// connect when there is none or it is about to expire (or fresh is set).
func (t *TerminalAPI) session(ctx context.Context, merchantID, hsn string, fresh bool) (string, error) {
	id := merchantID + "/" + hsn
	t.mu.Lock()
	s, ok := t.sessions[id]
	t.mu.Unlock()
	if ok && !fresh && t.Now().Add(sessionMargin).Before(s.expires) {
		return s.key, nil
	}
	cctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	h, err := t.post(cctx, "/connect", "", map[string]any{"merchantId": merchantID, "hsn": hsn, "force": true}, nil)
	switch {
	case errors.Is(err, ErrTerminalBusy):
		return "", err
	case errors.As(err, new(*terminalCodeError)):
		// The gateway answered about the terminal: it cannot be reached.
		return "", fmt.Errorf("%w: %w", ErrTerminalOffline, err)
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	s, err = parseSessionKey(h.Get("X-CardConnect-SessionKey"), t.Now())
	if err != nil {
		return "", fmt.Errorf("%w: %w: connect: %w", ErrUnavailable, ErrProcessorError, err)
	}
	t.mu.Lock()
	t.sessions[id] = s
	t.mu.Unlock()
	return s.key, nil
}

// parseSessionKey reads "KEY;expires=2026-12-02T10:15:00.000Z". Without an
// expiry the key is kept for five minutes.
func parseSessionKey(h string, now time.Time) (terminalSession, error) {
	key, attrs, _ := strings.Cut(h, ";")
	key = strings.TrimSpace(key)
	if key == "" {
		return terminalSession{}, errors.New("no X-CardConnect-SessionKey")
	}
	s := terminalSession{key: key, expires: now.Add(5 * time.Minute)}
	for _, a := range strings.Split(attrs, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(a), "=")
		if strings.EqualFold(name, "expires") {
			at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(value))
			if err != nil {
				return terminalSession{}, fmt.Errorf("session key expiry %q", value)
			}
			s.expires = at
		}
	}
	return s, nil
}

// withSession calls do with the terminal's session key, and once more with
// a new one if the key was refused (a refused key means nothing was done).
func (t *TerminalAPI) withSession(ctx context.Context, merchantID, hsn string, do func(session string) error) error {
	key, err := t.session(ctx, merchantID, hsn, false)
	if err != nil {
		return err
	}
	err = do(key)
	if !errors.Is(err, errSession) {
		return err
	}
	if key, err = t.session(ctx, merchantID, hsn, true); err != nil {
		return err
	}
	return do(key)
}

// Ping asks whether the terminal is connected (POST /ping).
func (t *TerminalAPI) Ping(ctx context.Context, merchantID, hsn string) error {
	var out struct {
		Connected bool `json:"connected"`
	}
	err := t.withSession(ctx, merchantID, hsn, func(session string) error {
		pctx, cancel := context.WithTimeout(ctx, t.Timeout)
		defer cancel()
		_, err := t.post(pctx, "/ping", session, map[string]string{"merchantId": merchantID, "hsn": hsn}, &out)
		return err
	})
	switch {
	case errors.Is(err, ErrTerminalOffline), errors.Is(err, ErrTerminalBusy):
		return fmt.Errorf("terminal api: ping %s: %w", hsn, err)
	case err != nil:
		return fmt.Errorf("terminal api: ping %s: %w: %w", hsn, ErrUnavailable, err)
	case !out.Connected:
		return fmt.Errorf("terminal api: ping %s: %w", hsn, ErrTerminalOffline)
	}
	return nil
}

// authCardAnswer is authCard's answer: the gateway's authorisation with
// the card's token, and the chip's EMV tags as a JSON text.
type authCardAnswer struct {
	RespStat   string `json:"respstat"`
	RespCode   string `json:"respcode"`
	RespText   string `json:"resptext"`
	RetRef     string `json:"retref"`
	Token      string `json:"token"`
	EntryMode  string `json:"entrymode"`
	EMVTagData string `json:"emvTagData"`
}

// AuthCard asks the terminal for a card, authorised and captured
// (POST /authCard, amount in cents).
func (t *TerminalAPI) AuthCard(ctx context.Context, s TerminalSale) (TerminalResult, error) {
	cents, err := centsOf(s.Amount)
	if err != nil {
		return TerminalResult{}, fmt.Errorf("terminal api: authCard order %s: %w: %w", s.OrderID, ErrUnavailable, err)
	}
	body := map[string]string{
		"merchantId": s.MerchantID, "hsn": s.HSN, "amount": cents, "orderId": s.OrderID, "invoiceId": s.InvoiceRef,
		"capture": "true", "includeSignature": "false", "includeAmountDisplay": "true", "beep": "true",
	}
	var out authCardAnswer
	err = t.withSession(ctx, s.MerchantID, s.HSN, func(session string) error {
		actx, cancel := context.WithTimeout(ctx, t.AuthTimeout)
		defer cancel()
		_, err := t.post(actx, "/authCard", session, body, &out)
		return err
	})
	switch {
	case errors.Is(err, ErrTerminalBusy), errors.Is(err, ErrTerminalCancelled), errors.Is(err, ErrTerminalOffline):
		return TerminalResult{}, fmt.Errorf("terminal api: authCard order %s: %w", s.OrderID, err)
	case err != nil:
		// Timed out, lost, or an answer that says nothing of the card: the
		// gateway may have the order.
		return TerminalResult{}, fmt.Errorf("terminal api: authCard order %s: %w: %w", s.OrderID, ErrUnavailable, err)
	}
	res, err := out.result()
	if err != nil {
		return TerminalResult{}, fmt.Errorf("terminal api: authCard order %s: %w: %w", s.OrderID, ErrUnavailable, err)
	}
	return res, nil
}

// result reads an authorisation's answer: approved with a retref, or
// declined with its words; anything else is ErrProcessorError.
func (a authCardAnswer) result() (TerminalResult, error) {
	res := TerminalResult{RetRef: a.RetRef, Token: a.Token, EntryMode: entryMode(a.EntryMode)}
	res.CardBrand, res.LastFour = tokenCard(a.Token)
	if a.EMVTagData != "" {
		var tags map[string]string
		if json.Unmarshal([]byte(a.EMVTagData), &tags) == nil {
			res.ApplicationLabel, res.AID = tags["Application Label"], tags["AID"]
			if res.EntryMode == "" {
				res.EntryMode = entryMode(tags["Entry method"])
			}
		}
	}
	switch {
	case a.RespStat == "A" && a.RetRef != "":
		res.Approved = true
		return res, nil
	case a.RespStat == "C":
		res.DeclineReason = strings.TrimSpace(a.RespText)
		if res.DeclineReason == "" {
			res.DeclineReason = "Card declined"
		}
		return res, nil
	}
	return TerminalResult{}, fmt.Errorf("%w: respstat %q respcode %q retref %q", ErrProcessorError, a.RespStat, a.RespCode, a.RetRef)
}

// CancelTerminal tells the terminal to stop waiting for a card (POST /cancel).
func (t *TerminalAPI) CancelTerminal(ctx context.Context, merchantID, hsn string) error {
	err := t.withSession(ctx, merchantID, hsn, func(session string) error {
		cctx, cancel := context.WithTimeout(ctx, t.Timeout)
		defer cancel()
		_, err := t.post(cctx, "/cancel", session, map[string]string{"merchantId": merchantID, "hsn": hsn}, nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("terminal api: cancel %s: %w: %w", hsn, ErrUnavailable, err)
	}
	return nil
}

// InquireOrder asks the gateway for the order (GET /inquireByOrderid),
// which answers one authorisation or a list of them.
func (t *TerminalAPI) InquireOrder(ctx context.Context, merchantID, orderID string) (TerminalResult, bool, error) {
	ictx, cancel := context.WithTimeout(ctx, t.gateway.Timeout)
	defer cancel()
	var raw json.RawMessage
	err := t.gateway.call(ictx, http.MethodGet, "/inquireByOrderid/"+url.PathEscape(orderID)+"/"+url.PathEscape(merchantID), nil, &raw)
	if err != nil {
		return TerminalResult{}, false, fmt.Errorf("terminal api: inquire order %s: %w: %w", orderID, ErrUnavailable, err)
	}
	var answers []inquiredOrder
	if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && trimmed[0] == '[' {
		err = json.Unmarshal(trimmed, &answers)
	} else if len(trimmed) > 0 {
		var one inquiredOrder
		err = json.Unmarshal(trimmed, &one)
		answers = append(answers, one)
	}
	if err != nil {
		return TerminalResult{}, false, fmt.Errorf("terminal api: inquire order %s: %w: %w: answer is not JSON of the expected shape",
			orderID, ErrUnavailable, ErrProcessorError)
	}
	var found *TerminalResult
	for _, a := range answers {
		if a.RespStat == "C" && isNotFound(gatewayResponse{RespStat: a.RespStat, RespCode: a.RespCode, RespText: a.RespText}) {
			continue
		}
		token := a.Token
		if token == "" {
			token = a.Account
		}
		res, err := authCardAnswer{RespStat: a.RespStat, RespCode: a.RespCode, RespText: a.RespText, RetRef: a.RetRef,
			Token: token, EntryMode: a.EntryMode}.result()
		if err != nil {
			continue // "B", or nonsense: not an outcome
		}
		if found == nil || res.Approved {
			found = &res
		}
	}
	if found == nil {
		return TerminalResult{}, false, nil
	}
	return *found, true, nil
}

type inquiredOrder struct {
	RespStat  string `json:"respstat"`
	RespCode  string `json:"respcode"`
	RespText  string `json:"resptext"`
	RetRef    string `json:"retref"`
	Token     string `json:"token"`
	Account   string `json:"account"`
	EntryMode string `json:"entrymode"`
}

// centsOf is an amount of dollars and cents in cents, as authCard takes it.
func centsOf(d apd.Decimal) (string, error) {
	var c apd.Decimal
	ctx := apd.BaseContext.WithPrecision(34)
	if _, err := ctx.Mul(&c, &d, apd.New(100, 0)); err != nil {
		return "", err
	}
	var whole apd.Decimal
	if _, err := ctx.Quantize(&whole, &c, 0); err != nil || whole.Cmp(&c) != 0 || whole.Sign() <= 0 {
		return "", fmt.Errorf("amount %s is not a positive number of cents", d.Text('f'))
	}
	return whole.Text('f'), nil
}
