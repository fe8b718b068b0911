package simulator

import (
	"encoding/json"
	"testing"
)

func TestObjEncoding(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" back \\ slash", "nl\ncr\rtab\t", "\x00\x01\x1f", "<&>",
		"ünïcødé ✓ 😀", "line\u2028sep\u2029", "bad \xff utf8"} {
		got, err := appendValue(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, got, err)
		}
		want := s
		if s == "bad \xff utf8" {
			want = "bad \ufffd utf8"
		}
		if back != want {
			t.Errorf("%q round-trips to %q", s, back)
		}
	}
	b, err := marshalLine(o("b", 1, "a", []any{true, nil, int64(2), []string{"<x>"}}, "c", o()))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"b":1,"a":[true,null,2,["<x>"]],"c":{}}` {
		t.Fatalf("got %s", b)
	}
}
