package contracts

import "time"

// APIKey describes an API key. The token is never part of it: only its
// first characters (Prefix), enough to tell which key a token is.
type APIKey struct {
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// APIKeyList is the answer of GET /v1/keys, oldest first, revoked keys
// included.
type APIKeyList struct {
	Keys []APIKey `json:"keys"`
}

// APIKeyCreate is the body of POST /v1/keys.
type APIKeyCreate struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// ExpiresIn, a Go duration ("720h"), ends the key that long after its
	// creation; empty means never.
	ExpiresIn string `json:"expires_in,omitempty"`
}

// APIKeyCreated is the answer of POST /v1/keys: the key and its token,
// which is shown this once and stored nowhere.
type APIKeyCreated struct {
	Key   APIKey `json:"key"`
	Token string `json:"token"`
}
