package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
	echomiddleware "github.com/oapi-codegen/echo-middleware"
)

// validatorOptions are the request validator's: every failure at once,
// authentication left to authenticate, and the handlers binding the body
// the validator checked, member names matched exactly ({"memo": null,
// "Memo": "…"} stores null, not an unchecked "Memo" matched without
// regard to case).
var validatorOptions = &echomiddleware.Options{
	Options: openapi3filter.Options{
		MultiError:         true,
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		KeepValidatedValue: true,
	},
	MultiErrorHandler: func(me openapi3.MultiError) *echo.HTTPError {
		p := validationProblem(me)
		return &echo.HTTPError{Code: p.status, Internal: p}
	},
}

// validateRequest checks every request of op against openapi.yaml like
// echomiddleware.OapiRequestValidatorWithOptions, with op's route from the
// operation table: the middleware's router would match the path against
// the spec's paths again, regular expression by regular expression, a
// third of the validator's cost on a read.
func validateRequest(op *operation) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := echomiddleware.ValidateRequestFromContext(c, echoRoute{c: c, route: op.route}, validatorOptions); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// echoRoute is the route echo matched, as kin-openapi's router would give it.
type echoRoute struct {
	c     echo.Context
	route *routers.Route
}

func (r echoRoute) FindRoute(*http.Request) (*routers.Route, map[string]string, error) {
	names, values := r.c.ParamNames(), r.c.ParamValues()
	params := make(map[string]string, len(names))
	for i, name := range names {
		// Echo gives a path it cannot route to its nearest route, the rest
		// in the last parameter (/locations/x/mids is /locations/:id with
		// id "x/mids"); a path segment is never empty and holds no slash,
		// so such a request matches no operation, as the spec's router says.
		v, err := url.PathUnescape(values[i])
		if err != nil {
			v = values[i]
		}
		if v == "" || strings.Contains(v, "/") {
			return nil, nil, routers.ErrPathNotFound
		}
		params[name] = values[i]
	}
	return r.route, params, nil
}
