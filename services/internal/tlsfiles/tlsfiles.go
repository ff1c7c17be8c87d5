// Package tlsfiles turns the PEM files an operator names (--mysql-tls-ca,
// --redis-tls-cert, ...) into the *tls.Config each client library takes,
// so MySQL, Redis and NATS are configured alike.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names the PEM files of one TLS client connection. Every field is
// optional: CA alone verifies the server against that authority instead of
// the system's; Cert and Key (both or neither) add a client certificate.
type Files struct {
	CA   string
	Cert string
	Key  string
	// ServerName overrides the name the server's certificate must carry
	// (default: the host dialled).
	ServerName string
}

// Enabled reports whether any file is named, which turns TLS on.
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Validate reports a half-given client key pair.
func (f Files) Validate(what string) error {
	if (f.Cert == "") != (f.Key == "") {
		return fmt.Errorf("%s tls: give both the client certificate and its key, or neither", what)
	}
	return nil
}

// Config loads the files. It returns nil, nil when none is named (plain
// TCP), so callers can pass the result straight on.
func (f Files) Config(what string) (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	if err := f.Validate(what); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("%s tls ca: %w", what, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s tls ca %s: %w", what, f.CA, errors.New("no PEM certificate in it"))
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("%s tls client certificate: %w", what, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
