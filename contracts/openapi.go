package contracts

import _ "embed"

// OpenAPI is the OpenAPI 3.1 description of ax's HTTP API, embedded so that
// the binary can serve it and tests can validate it without locating files on
// disk. It lives beside the Go types it describes, and a test keeps the two
// equal, so it is the single source of the API's description.
//
//go:embed openapi.yaml
var OpenAPI []byte
