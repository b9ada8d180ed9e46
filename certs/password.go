package certs

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Password hashes, as stored in the cluster file's users[].password:
//
//	pbkdf2-sha256$<iterations>$<salt, base64>$<key, base64>
//
// PBKDF2-HMAC-SHA256 (crypto/pbkdf2, RFC 8018) with a 16-byte random salt
// and a 32-byte key. golang.org/x/crypto (argon2id, scrypt) is not in
// go.mod; PBKDF2 from the standard library at OWASP's recommended
// iteration count is the fallback the brief names.

// PasswordScheme names the hash in its encoding.
const PasswordScheme = "pbkdf2-sha256"

// DefaultIterations is HashPassword's cost (OWASP 2023, PBKDF2-HMAC-SHA256).
const DefaultIterations = 600_000

// MinIterations is the least cost ParsePasswordHash accepts.
const MinIterations = 10_000

// PasswordHash is a parsed password hash.
type PasswordHash struct {
	Iterations int
	Salt, Key  []byte
}

// HashPassword hashes pw with a fresh salt at DefaultIterations.
func HashPassword(pw string) (string, error) { return HashPasswordCost(pw, DefaultIterations) }

// HashPasswordCost hashes pw with a fresh salt and the given iteration count.
func HashPasswordCost(pw string, iter int) (string, error) {
	if iter < MinIterations {
		return "", fmt.Errorf("password hash: %d iterations is below the minimum %d", iter, MinIterations)
	}
	salt := make([]byte, 16)
	rand.Read(salt)
	key, err := pbkdf2.Key(sha256.New, pw, salt, iter, 32)
	if err != nil {
		return "", err
	}
	b64 := base64.RawStdEncoding.EncodeToString
	return fmt.Sprintf("%s$%d$%s$%s", PasswordScheme, iter, b64(salt), b64(key)), nil
}

// ParsePasswordHash decodes an encoded hash; the error says what is wrong.
func ParsePasswordHash(s string) (PasswordHash, error) {
	var h PasswordHash
	parts := strings.Split(s, "$")
	if len(parts) != 4 || parts[0] != PasswordScheme {
		return h, errors.New("not a password hash: want pbkdf2-sha256$<iterations>$<salt>$<key> (make one with `synod certs hash-password`)")
	}
	iter, err := strconv.Atoi(parts[1])
	if err != nil || iter < MinIterations {
		return h, fmt.Errorf("password hash: iterations %q must be a number >= %d", parts[1], MinIterations)
	}
	h.Iterations = iter
	if h.Salt, err = base64.RawStdEncoding.DecodeString(parts[2]); err != nil || len(h.Salt) < 8 {
		return h, errors.New("password hash: salt must be at least 8 bytes of unpadded base64")
	}
	if h.Key, err = base64.RawStdEncoding.DecodeString(parts[3]); err != nil || len(h.Key) != 32 {
		return h, errors.New("password hash: key must be 32 bytes of unpadded base64")
	}
	return h, nil
}

// Verify reports whether pw matches, in time independent of where they differ.
func (h PasswordHash) Verify(pw string) bool {
	key, err := pbkdf2.Key(sha256.New, pw, h.Salt, h.Iterations, len(h.Key))
	return err == nil && subtle.ConstantTimeCompare(key, h.Key) == 1
}
