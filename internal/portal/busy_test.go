package portal

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/people"
)

// No hashing slot within its wait (people.ErrBusy) is a 503 that says the
// service is busy and when to come back, not that something went wrong.
func TestBusyPage(t *testing.T) {
	h := &handler{}
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, signInPath, nil), rec)
	if err := h.failure(c, fmt.Errorf("signing in: %w", people.ErrBusy)); err == nil {
		t.Error("the failure is not returned for the log")
	}
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "5" {
		t.Errorf("answered %d, Retry-After %q; want 503 and 5", rec.Code, rec.Header().Get("Retry-After"))
	}
	for _, want := range []string{"The service is busy", "try again in 5 seconds"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "Something went wrong") {
		t.Errorf("the busy page says something went wrong:\n%s", body)
	}
}
