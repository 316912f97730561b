// Package idemkey reads an idempotency key as submissions and the
// Idempotency-Key header carry it: the Go client checks every key it is
// given with Normalize, and the HTTP API checks the header with it before
// it reads the body.
package idemkey

import (
	"errors"
	"fmt"
	"strings"
)

// Normalize unquotes an RFC 8941 quoted string and checks that the key is
// 1..maxLen printable ASCII characters. The error's text says what is wrong
// (for the message of a field error).
func Normalize(k string, maxLen int) (string, error) {
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		var b strings.Builder
		in := k[1 : len(k)-1]
		for i := 0; i < len(in); i++ {
			c := in[i]
			if c == '\\' && i+1 < len(in) && (in[i+1] == '"' || in[i+1] == '\\') {
				i++
				c = in[i]
			} else if c == '"' || c == '\\' {
				return "", errors.New("is not a valid quoted string")
			}
			b.WriteByte(c)
		}
		k = b.String()
	}
	if len(k) < 1 || len(k) > maxLen {
		return "", fmt.Errorf("must be 1..%d characters", maxLen)
	}
	for i := range len(k) {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", errors.New("must be printable ASCII (0x20..0x7e)")
		}
	}
	return k, nil
}
