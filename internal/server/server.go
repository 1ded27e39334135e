// Package server builds the service `payreq serve` runs, in one place
// (New): the app (internal/app: database, secrets, stores), the fronts
// mounted beside each other, and the workers and loops behind them. The
// fronts are the API (internal/api), the pay page under /pay/
// (internal/paypage), the portal under /portal/ (internal/portal), the
// resellers' sign-up pages under /apply/ (internal/signup) and the published
// contract (internal/docs). Each is its own echo instance with its own
// middleware and its own way of answering errors; they share the request
// log and the reading of the client's address.
package server

import (
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/api"
	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/docs"
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/paypage"
	"github.com/payreq/payreq/internal/portal"
	"github.com/payreq/payreq/internal/signup"
	"github.com/payreq/payreq/internal/web"
)

// handler is every front behind one HTTP handler. Serve it with
// framing.Configure and framing.Listen: what net/http refuses before the
// handler runs is then answered with the API's problem documents too.
func handler(a *app.App, log *slog.Logger) (http.Handler, error) {
	cfg := a.Config
	address := clientAddress(cfg.TrustedProxies)
	apiFront, err := api.New(api.Deps{
		Log: log, DB: a.DB, Auth: a.Auth, Directory: a.Directory, Invoices: a.Invoices, Customers: a.Customers, Recurring: a.Recurring, Payments: a.Payments,
		Terminals: a.Terminals, Resellers: a.Resellers, Events: a.Events, Webhooks: a.Webhooks, Metrics: a.Metrics, PDFs: a.PDFs, PublicURL: cfg.PublicURL,
		RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst, RequestTimeout: cfg.RequestTimeout,
		ValidateRequests: cfg.ValidateRequests, ClientAddress: address,
	})
	if err != nil {
		return nil, err
	}
	docsFront, err := docs.New(cfg.PublicURL, log, address)
	if err != nil {
		return nil, err
	}
	csrf := web.NewCSRF(cfg.PublicURL, a.CSRFKey) // the portal's and the sign-up page's
	portalFront := portal.New(portal.Deps{Log: log, People: a.People, Auth: a.Auth, Resellers: a.Resellers,
		Directory: a.Directory, Invoices: a.Invoices, Payments: a.Payments, Events: a.Events, Webhooks: a.Webhooks, Terminals: a.Terminals, Customers: a.Customers, Recurring: a.Recurring, PDFs: a.PDFs, Now: a.Now,
		PublicURL: cfg.PublicURL, CSRF: csrf, ClientAddress: address, RequestTimeout: cfg.RequestTimeout})
	payFront := paypage.New(paypage.Deps{Log: log, Invoices: a.Invoices, Payments: a.Payments, Recurring: a.Recurring, Directory: a.Directory, PDFs: a.PDFs,
		FormKey: a.PayPageKey, Now: a.Now, ClientAddress: address, RequestTimeout: cfg.RequestTimeout})
	signUpFront := signup.New(signup.Deps{Log: log, Resellers: a.Resellers, CSRF: csrf,
		ClientAddress: address, RequestTimeout: cfg.RequestTimeout})

	// By the path alone, as sent: http.ServeMux would redirect paths that
	// are not clean, which the fronts answer themselves.
	return fronts{publicURL: cfg.PublicURL, HandlerFunc: func(w http.ResponseWriter, r *http.Request) {
		if cfg.HSTS {
			w.Header().Set("Strict-Transport-Security", hsts)
		}
		if r.Method == http.MethodHead {
			// HEAD is GET without the body (RFC 9110 §9.1), on every GET
			// route: the fronts answer a GET, and net/http, which still
			// sees the HEAD request, sends no body.
			get := *r
			get.Method = http.MethodGet
			r = &get
		}
		// A body the client cuts off, garbles or sends too slowly fails
		// its reader with framing.BodyError, which each front answers as the
		// client's doing.
		r.Body = framing.Body(r.Body)
		switch p := r.URL.Path; {
		case framing.Ambiguous(r):
			apiFront.ServeHTTP(w, r) // a 400 on every path
		case strings.HasPrefix(p, "/pay/"):
			payFront.ServeHTTP(w, r)
		case p == "/portal" || strings.HasPrefix(p, "/portal/"):
			portalFront.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/apply/"):
			signUpFront.ServeHTTP(w, r)
		case slices.Contains(docs.Paths, p):
			docsFront.ServeHTTP(w, r)
		default:
			apiFront.ServeHTTP(w, r)
		}
	}}, nil
}

// hsts tells browsers to reach the deployment (and its subdomains) over
// https only, for a year: after one visit, no plain-http request (and no
// downgrade on the way) is ever made to it again.
const hsts = "max-age=31536000; includeSubDomains"

// fronts is the handler that handler makes.
type fronts struct {
	http.HandlerFunc
	publicURL string
}

// Refusal is the API's answer: a problem document, or an OAuth error for
// the token endpoint. Which other front a request net/http could not read
// was meant for is not told apart.
func (f fronts) Refusal(status int, requestLine string) (string, []byte) {
	return api.Refusal(f.publicURL, status, requestLine)
}

var _ framing.Refuser = fronts{}

// clientAddress is the client's address: the connection's, or with
// trusted proxies, the last address in X-Forwarded-For that none of them
// added.
func clientAddress(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
