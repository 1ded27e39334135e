package rule

import (
	"net/http"
	"testing"
)

// Every kind has its status, the API's (openapi.yaml), on every front.
func TestKindStatus(t *testing.T) {
	want := map[Kind]int{NotFound: http.StatusNotFound, Invalid: http.StatusBadRequest,
		Unprocessable: http.StatusUnprocessableEntity, Conflict: http.StatusUnprocessableEntity,
		KeyReused: http.StatusUnprocessableEntity, Forbidden: http.StatusForbidden, Limited: http.StatusTooManyRequests,
		Busy: http.StatusConflict, Changed: http.StatusPreconditionFailed, Taken: http.StatusConflict}
	for k := range kindNames {
		if got := k.Status(); got != want[k] {
			t.Errorf("%v: %d, want %d", k, got, want[k])
		}
	}
	if len(statuses) != len(kindNames) {
		t.Errorf("%d kinds, %d statuses", len(kindNames), len(statuses))
	}
}
