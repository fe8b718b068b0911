package documents

import (
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// EncodeResponse returns the JSON of r. Agent text that is not valid UTF-8
// does not fail it (it becomes U+FFFD); metadata that is not valid JSON does.
func EncodeResponse(r *ChatResponse) ([]byte, error) {
	return json.Marshal(r, jsontext.AllowInvalidUTF8(true))
}
