// Package hostcred makes and checks node agent credentials: one random bearer token per
// host. The token names its host, so that the site manager knows which host entry to
// check without a search:
//
//	ot1.<hostname>.<43 characters: 32 random bytes, base64url without padding>
//
// Host names are single DNS labels (no dots) and base64url has no dots, so the three
// parts split unambiguously. The directory keeps only Hash(token), "sha256:" and 64 hex
// digits; 256 random bits need no salt or slow hash to resist guessing from the hash.
package hostcred

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Prefix is the token format's version tag.
const Prefix = "ot1"

// SecretBytes is the number of random bytes in a token.
const SecretBytes = 32

// ErrMalformed is returned by Parse for anything that is not a well-formed token.
var ErrMalformed = errors.New("malformed host token: expected ot1.<hostname>.<secret>")

// New makes a fresh token for host.
func New(host string) (string, error) {
	if err := model.ValidHostname(host); err != nil {
		return "", err
	}
	var b [SecretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return Prefix + "." + host + "." + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Parse checks a token's form and returns the host it names. It does not say whether the
// token is valid: compare its Hash with the stored one (Verify).
func Parse(token string) (string, error) {
	if len(token) > 128 {
		return "", ErrMalformed
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != Prefix || model.ValidHostname(parts[1]) != nil {
		return "", ErrMalformed
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(b) != SecretBytes {
		return "", ErrMalformed
	}
	return parts[1], nil
}

// Hash is what the directory stores for a token.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Verify reports whether token hashes to stored, comparing in constant time. An empty
// stored hash (no credential) matches nothing.
func Verify(token, stored string) bool {
	if stored == "" {
		return false
	}
	h := Hash(token)
	return subtle.ConstantTimeCompare([]byte(h), []byte(stored)) == 1
}
