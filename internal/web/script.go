package web

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"

	"github.com/labstack/echo/v4"
)

// The pages work without JavaScript. The one script there is, copy.js,
// adds a copy button beside each element marked data-copy (a link to send
// to someone); without it the text is there to select. A front serves it
// under its own prefix with ServeCopyScript, and a page that loads it
// allows it, and nothing else, with AllowScript.

//go:embed copy.js
var copyJS []byte

// CopyScriptName is the script's file name; it carries a hash of its
// content, so browsers may keep it for good.
var CopyScriptName = func() string {
	sum := sha256.Sum256(copyJS)
	return "copy-" + hex.EncodeToString(sum[:6]) + ".js"
}()

// ServeCopyScript answers the script when file is its name, and reports
// false otherwise (the front answers its own 404).
func ServeCopyScript(c echo.Context, file string) (bool, error) {
	if file != CopyScriptName {
		return false, nil
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	return true, c.Blob(http.StatusOK, "text/javascript; charset=utf-8", copyJS)
}

// AllowScript lets the answer's page load the script at src, an absolute
// address of the service's own (scheme, host and the file's path), and
// no other: Headers' policy with script-src naming exactly that file.
func AllowScript(c echo.Context, src string) {
	c.Response().Header().Set("Content-Security-Policy", ContentSecurityPolicy+"; script-src "+src)
}
