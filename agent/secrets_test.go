package agent

import "testing"

// TestRedactSecrets: every form in which the agent's stderr can carry what
// the gateway gave it is masked: a key that begins a longer header value,
// a token after "Bearer", JSON escapes, and the end of a secret where the
// kept tail of stderr begins within it.
func TestRedactSecrets(t *testing.T) {
	t.Parallel()
	secrets := agentSecrets(Config{APIKey: `sk-abc.def*+?`, Headers: []string{
		"X-One: sk-abc.def*+?-LONGER-SUFFIX", "Authorization: Bearer zzz-bearer-123",
		`X-Two: tok(\d)[x]$`, "X-Three: clé-secrète-1", "X-Four: pässwörd-🔑key", "X-Html: a<b>&c-secretvalue",
		"X-Short: Bearer abc123"}})
	for in, want := range map[string]string{
		"k1 sk-abc.def*+? | h1 sk-abc.def*+?-LONGER-SUFFIX | end": "k1 [redacted] | h1 [redacted] | end",
		"+?-LONGER-SUFFIXBBBB":                  "[redacted]BBBB",
		"auth failed for zzz-bearer-123":        "auth failed for [redacted]",
		`{"header":"tok(\\d)[x]$"}`:             `{"header":"[redacted]"}`,
		`{"h":"cl\u00e9-secr\u00e8te-1"}`:       `{"h":"[redacted]"}`,
		"plain clé-secrète-1 too":               "plain [redacted] too",
		"nothing secret here, just Bearer text": "nothing secret here, just Bearer text",
		"…+?-LONGER-SUFFIXZZZ":                  "…[redacted]ZZZ",
		`"p\u00e4ssw\u00f6rd-\ud83d\udd11key"`:  `"[redacted]"`,
		`"a\u003cb\u003e\u0026c-secretvalue"`:   `"[redacted]"`,
		"token abc123 rejected":                 "token [redacted] rejected",
	} {
		if got := redact(in, secrets); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
