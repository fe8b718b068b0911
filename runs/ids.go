package runs

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// NewResponseID returns a new response id: chat_ and 24 random hex digits.
func NewResponseID() string { return "chat_" + randomHex(12) }

// NewRequestID returns a new request id: 16 random hex digits.
func NewRequestID() string { return randomHex(8) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Now returns the current time as an RFC 3339 UTC string, as responses carry it.
func Now() string { return time.Now().UTC().Format(time.RFC3339) }
