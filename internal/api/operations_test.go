package api

import (
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/payreq/payreq/gen"
)

func TestEveryOperationOfTheSpecHasItsPermission(t *testing.T) {
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := readOperations(spec)
	if err != nil {
		t.Fatalf("the spec is refused: %v", err)
	}
	if got := ops["getPaymentRequest"].permission; got != "payments.view" {
		t.Errorf("getPaymentRequest needs %q, want payments.view", got)
	}
	if got := ops["createToken"].permission; got != "" {
		t.Errorf("createToken needs %q, want no permission", got)
	}
}

// An operation the spec leaves without a permission would be served
// without authentication: the server refuses to start instead.
func TestAnOperationWithoutPermissionStopsTheServer(t *testing.T) {
	for name, change := range map[string]func(*openapi3.Operation){
		"no security":       func(op *openapi3.Operation) { op.Security = nil },
		"empty requirement": func(op *openapi3.Operation) { op.Security = &openapi3.SecurityRequirements{{}} },
		"two permissions": func(op *openapi3.Operation) {
			(*op.Security)[0]["oauth2"] = []string{"payments.view", "payments.create"}
		},
		"a public one guarded": nil,
	} {
		t.Run(name, func(t *testing.T) {
			spec, err := gen.GetSpec()
			if err != nil {
				t.Fatal(err)
			}
			want := "listLocations"
			if change == nil {
				want = "getHealth"
				spec.Paths.Find("/healthz").Get.Security = &openapi3.SecurityRequirements{{"oauth2": {"locations.view"}}}
			} else {
				change(spec.Paths.Find("/locations").Get)
			}
			_, err = readOperations(spec)
			if err == nil {
				t.Fatal("the spec is accepted")
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		})
	}
}
