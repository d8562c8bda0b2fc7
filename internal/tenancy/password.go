package tenancy

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Password hashing: Argon2id with OWASP's minimum parameters (19 MiB, 2
// passes, 1 lane), a 16-byte salt and a 32-byte key, stored in the PHC
// string format.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

// Password lengths accepted for an account.
const (
	MinPasswordLength = 8
	MaxPasswordLength = 256
)

// HashPassword returns the PHC-format Argon2id hash of password.
func HashPassword(password string) string {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		enc.EncodeToString(salt), enc.EncodeToString(key))
}

// CheckPassword reports whether password matches the PHC hash. Hashes
// with parameters past sane bounds (a corrupted or hostile record) never
// match, so a bad record cannot make a check take minutes.
func CheckPassword(hash, password string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m > 1<<22 || t > 64 || p == 0 {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[4])
	want, err2 := enc.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// checkPassword validates a new password's length.
func checkPassword(p string) error {
	if len(p) < MinPasswordLength {
		return &InvalidError{Property: "Password", Value: "(hidden)", Hint: fmt.Sprintf("Use at least %d characters.", MinPasswordLength)}
	}
	if len(p) > MaxPasswordLength {
		return &InvalidError{Property: "Password", Value: "(hidden)", Hint: fmt.Sprintf("Use at most %d characters.", MaxPasswordLength)}
	}
	return nil
}
