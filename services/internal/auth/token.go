package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/services/internal/store"
)

// TokenPrefix starts every token, so that secret scanners and people can
// tell an ax token from other strings.
const TokenPrefix = "ax_"

// tokenBytes is the entropy of a token: 256 bits, beyond any guessing.
const tokenBytes = 32

// displayLen is how many leading characters of a token are kept for
// display ("ax_" and 7 more): enough to tell keys apart, far too few to
// help guess the rest.
const displayLen = 10

var tokenEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Token is a new key's secret, its hash and its display prefix.
type Token struct {
	Secret string
	Hash   [sha256.Size]byte
	Prefix string
}

// NewToken draws a token from crypto/rand.
func NewToken() (Token, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return Token{}, fmt.Errorf("draw token: %w", err)
	}
	secret := TokenPrefix + strings.ToLower(tokenEncoding.EncodeToString(b))
	return Token{Secret: secret, Hash: HashToken(secret), Prefix: secret[:displayLen]}, nil
}

// HashToken is what MySQL keeps of a token. A plain SHA-256 suffices:
// tokens are 256 random bits, so there is no dictionary to try, and a slow
// hash would be paid on every request.
func HashToken(token string) [sha256.Size]byte {
	return sha256.Sum256([]byte(token))
}

// Creator is the part of the store that creates keys.
type Creator interface {
	CreateAPIKey(ctx context.Context, k store.NewAPIKey) (*store.APIKey, error)
}

// CreateKey validates a new key, draws its token and stores its hash; the
// returned token's Secret is shown once and kept nowhere. expiresAt nil
// means the key never expires. Both `ax key create` (straight to MySQL,
// so that the first admin key needs no key) and POST /v1/keys use it.
func CreateKey(ctx context.Context, st Creator, name string, role Role, expiresAt *time.Time) (Token, *store.APIKey, error) {
	if err := ValidateName(name); err != nil {
		return Token{}, nil, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return Token{}, nil, err
	}
	tok, err := NewToken()
	if err != nil {
		return Token{}, nil, err
	}
	k, err := st.CreateAPIKey(ctx, store.NewAPIKey{Name: name, Role: string(role), TokenHash: tok.Hash[:],
		Prefix: tok.Prefix, ExpiresAt: expiresAt})
	if err != nil {
		return Token{}, nil, err
	}
	return tok, k, nil
}
