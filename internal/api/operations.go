package api

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
)

// operation is one operation of openapi.yaml, as the spec is read once at
// start: route registration, authentication, the text checks and request
// validation all take what they need from it.
type operation struct {
	id     string // operationId
	method string
	path   string // echo's form: /payment-requests/:id
	// permission is the one permission the operation's security requirement
	// names; "" for the public operations.
	permission string
	// The query and header parameters it declares (each takes one value),
	// those of the query that are integers, and the bodies it takes.
	query, header, integers []string
	json, form              bool
	// pdf: it answers application/pdf too, when the request prefers it.
	pdf bool
	// route is the operation as kin-openapi's validator wants it.
	route *routers.Route
}

// publicOperations need no access token: the token endpoint itself, the
// keys that verify tokens, and the probes. Every other operation must name
// exactly one permission, or the server does not start: an operation the
// spec leaves without one would otherwise be served unauthenticated.
var publicOperations = []string{"createToken", "getJwks", "getHealth", "getReadiness"}

// readOperations walks the spec once into the table of its operations,
// keyed by operationId.
func readOperations(spec *openapi3.T) (map[string]*operation, error) {
	ops := map[string]*operation{}
	var problems []string
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			o := &operation{id: operationID(op), method: method, path: echoPath(path),
				route: &routers.Route{Spec: spec, Path: path, PathItem: item, Method: method, Operation: op}}
			for _, ref := range append(slices.Clone(item.Parameters), op.Parameters...) {
				switch p := ref.Value; {
				case p == nil:
				case p.In == "query":
					o.query = append(o.query, p.Name)
					if p.Schema != nil && p.Schema.Value != nil && p.Schema.Value.Type.Is("integer") {
						o.integers = append(o.integers, p.Name)
					}
				case p.In == "header":
					o.header = append(o.header, p.Name)
				}
			}
			if body := op.RequestBody; body != nil && body.Value != nil {
				o.json = body.Value.Content.Get("application/json") != nil
				o.form = body.Value.Content.Get("application/x-www-form-urlencoded") != nil
			}
			if ok := op.Responses.Status(200); ok != nil && ok.Value != nil {
				o.pdf = ok.Value.Content.Get("application/pdf") != nil
			}
			permissions := requiredPermissions(op)
			public := slices.Contains(publicOperations, o.id)
			switch {
			case public && len(permissions) > 0:
				problems = append(problems, fmt.Sprintf("%s (%s %s) is public but names permissions %v", o.id, method, path, permissions))
			case !public && len(permissions) != 1:
				problems = append(problems, fmt.Sprintf("%s (%s %s) names %d permissions; it must name exactly one", o.id, method, path, len(permissions)))
			case !public:
				o.permission = permissions[0]
			}
			ops[o.id] = o
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("api: openapi.yaml: %s", strings.Join(problems, "; "))
	}
	return ops, nil
}

// operationID is op's operationId as openapi.yaml spells it, and as the
// generated registration names it: the embedded copy of the spec has it
// capitalised (createToken → CreateToken).
func operationID(op *openapi3.Operation) string {
	id := op.OperationID
	if id == "" {
		return ""
	}
	return strings.ToLower(id[:1]) + id[1:]
}

// requiredPermissions are the oauth2 scopes of an operation's security
// requirements.
func requiredPermissions(op *openapi3.Operation) []string {
	if op.Security == nil {
		return nil
	}
	var out []string
	for _, req := range *op.Security {
		for _, scope := range req["oauth2"] {
			if !slices.Contains(out, scope) {
				out = append(out, scope)
			}
		}
	}
	return out
}

// echoPath is an OpenAPI path as echo routes it: /a/{id} → /a/:id.
func echoPath(p string) string {
	var b strings.Builder
	for _, seg := range strings.Split(p, "/")[1:] {
		b.WriteByte('/')
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			seg = ":" + seg[1:len(seg)-1]
		}
		b.WriteString(seg)
	}
	return b.String()
}
