package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/web"
)

// The copy script is served under its hashed name only, kept for good;
// a page that loads it allows that one address beside Headers' policy.
func TestCopyScript(t *testing.T) {
	e := echo.New()
	e.GET("/assets/:file", func(c echo.Context) error {
		if ok, err := web.ServeCopyScript(c, c.Param("file")); ok {
			return err
		}
		return c.NoContent(http.StatusNotFound)
	})
	e.GET("/page", func(c echo.Context) error {
		web.AllowScript(c, "https://pay.example.com/assets/"+web.CopyScriptName)
		return c.HTML(http.StatusOK, "<p>page</p>")
	}, web.Headers)
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w
	}
	w := get("/assets/" + web.CopyScriptName)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/javascript; charset=utf-8" ||
		!strings.Contains(w.Header().Get("Cache-Control"), "immutable") || !strings.Contains(w.Body.String(), "[data-copy]") {
		t.Errorf("the script: %d %v\n%s", w.Code, w.Header(), w.Body)
	}
	if w := get("/assets/copy.js"); w.Code != http.StatusNotFound {
		t.Errorf("copy.js without its hash: %d", w.Code)
	}
	want := web.ContentSecurityPolicy + "; script-src https://pay.example.com/assets/" + web.CopyScriptName
	if got := get("/page").Header().Get("Content-Security-Policy"); got != want {
		t.Errorf("policy %q, want %q", got, want)
	}
}
