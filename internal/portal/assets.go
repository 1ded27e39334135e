package portal

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/web"
)

// script is the portal's one script: a little progressive JavaScript (more
// line rows in the invoice form, a button copying a pay link). Every page
// works without it.
//
//go:embed assets/portal.js
var script []byte

// scriptPath is the script's address; its name carries a hash of its
// content, so browsers may keep it for good.
var scriptPath = func() string {
	sum := sha256.Sum256(script)
	return "/portal/assets/portal-" + hex.EncodeToString(sum[:6]) + ".js"
}()

// scripted are the pages (templates) that load the script: their policy
// allows scripts of the portal's origin (the script alone), none inline;
// every other page keeps the fronts' policy, which allows none.
var scripted = map[string]bool{"invoice": true, "invoice-new": true}

const scriptPolicy = web.ContentSecurityPolicy + "; script-src 'self'"

// serveScript answers the script when file is its name, and reports
// false otherwise.
func serveScript(c echo.Context, file string) (bool, error) {
	if "/portal/assets/"+file != scriptPath {
		return false, nil
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	return true, c.Blob(http.StatusOK, "text/javascript; charset=utf-8", script)
}
