//go:build tools

// Package tools pins the versions of the code generator used by `make generate`.
package tools

import (
	_ "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen"
)
