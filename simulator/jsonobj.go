package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// field is one key and value of an obj.
type field struct {
	key string
	val any
}

// obj is a JSON object that keeps its keys in the order they were added, so that
// the simulator's lines have the same key order as the real CLI's.
type obj []field

// o builds an obj from alternating keys and values.
func o(kv ...any) obj {
	if len(kv)%2 != 0 {
		panic("simulator: o needs key/value pairs")
	}
	out := make(obj, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			panic(fmt.Sprintf("simulator: key %v is not a string", kv[i]))
		}
		out = append(out, field{key: k, val: kv[i+1]})
	}
	return out
}

// get returns the value stored under key, or nil.
func (ob obj) get(key string) any {
	for _, f := range ob {
		if f.key == key {
			return f.val
		}
	}
	return nil
}

// MarshalJSON writes the object with its keys in insertion order and without
// HTML escaping, as Node's JSON.stringify does.
func (ob obj) MarshalJSON() ([]byte, error) {
	return appendValue(nil, ob)
}

// appendValue appends the JSON encoding of v. Objects, slices and scalars
// used by the scripted events are written directly, so that nested objects
// are not re-validated at every level (results can be megabytes); anything
// else goes through encoding/json.
func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case obj:
		b = append(b, '{')
		for i, f := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, f.key)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, f.val); err != nil {
				return nil, fmt.Errorf("encode value of %q: %w", f.key, err)
			}
		}
		return append(b, '}'), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case []string:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, e)
		}
		return append(b, ']'), nil
	case string:
		return appendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case nil:
		return append(b, "null"...), nil
	}
	enc, err := marshalLine(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// appendString appends s as a JSON string. Like JSON.stringify it escapes
// only quotes, backslashes and control characters; it also escapes U+2028 and
// U+2029 as encoding/json does, and replaces invalid UTF-8.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\\ufffd"...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// marshalLine encodes v as one JSON line without HTML escaping and without the
// trailing newline.
func marshalLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
