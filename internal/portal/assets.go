package portal

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/web"
)

// The portal's pages work without JavaScript; two small scripts add to
// some: web's copy button (a pay link, a sign-up page's address), and
// lines.js, the invoice editor's rows of lines, live totals and customer
// filter. A page that loads one allows that one file alone (allowScript).

//go:embed assets/lines.js
var linesJS []byte

// Where the scripts are; a name carries a hash of its content, so
// browsers may keep it for good.
var (
	linesScript = func() string {
		sum := sha256.Sum256(linesJS)
		return "/portal/assets/lines-" + hex.EncodeToString(sum[:6]) + ".js"
	}()
	copyScript = "/portal/assets/" + web.CopyScriptName
)

// serveLines answers lines.js when file is its name, and reports false
// otherwise.
func serveLines(c echo.Context, file string) (bool, error) {
	if "/portal/assets/"+file != linesScript {
		return false, nil
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	return true, c.Blob(http.StatusOK, "text/javascript; charset=utf-8", linesJS)
}

// allowScript lets the answer's page load the script at path (one of the
// above) and no other, by its absolute address (web.AllowScript).
func (h *handler) allowScript(c echo.Context, path string) {
	if u, err := url.Parse(h.PublicURL); err == nil {
		web.AllowScript(c, u.Scheme+"://"+u.Host+path)
	}
}
