package simulator

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// newUUID returns a random version 4 UUID in its canonical text form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

// newHexUUID returns 16 random bytes in UUID layout without version bits, like
// the `fc_` half of the CLI's call ids.
func newHexUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// randomSuffix returns n random characters from [a-z0-9], as in the last part
// of a model_call_id.
func randomSuffix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// newCallID returns a tool call id in the current CLI's form
// `call-<uuid>-<step>\nfc_<uuid>_<index>` (with a literal newline).
func newCallID(step, index int) string {
	return fmt.Sprintf("call-%s-%d\nfc_%s_%d", newUUID(), step, newHexUUID(), index)
}
