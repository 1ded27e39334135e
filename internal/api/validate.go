package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
	echomiddleware "github.com/oapi-codegen/echo-middleware"
)

// requestValidator checks every request against openapi.yaml like
// echomiddleware.OapiRequestValidatorWithOptions, with the same options,
// but finds the operation through echo's own routing: the middleware's
// router would match the path against the spec's paths again, regular
// expression by regular expression, a third of the validator's cost on a
// read.
func requestValidator(spec *openapi3.T, opts *echomiddleware.Options) echo.MiddlewareFunc {
	routes := map[string]*routers.Route{}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			routes[method+" "+toEchoPath(path)] = &routers.Route{Spec: spec, Path: path, PathItem: item, Method: method, Operation: op}
		}
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if opts.Skipper(c) {
				return next(c)
			}
			if err := echomiddleware.ValidateRequestFromContext(c, echoRoute{c: c, routes: routes}, opts); err != nil {
				return opts.ErrorHandler(c, err)
			}
			return next(c)
		}
	}
}

// echoRoute is the route echo matched, as kin-openapi's router would give it.
type echoRoute struct {
	c      echo.Context
	routes map[string]*routers.Route
}

func (r echoRoute) FindRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	route, ok := r.routes[req.Method+" "+r.c.Path()]
	if !ok {
		return nil, nil, routers.ErrPathNotFound
	}
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
	return route, params, nil
}
