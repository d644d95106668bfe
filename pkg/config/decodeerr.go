// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// describeDecodeError rewrites a decoder's type error in the file's terms:
// the field path as the user wrote it, indices included
// (priorityGroups[0].offset), the value they gave and what the field wants,
// in words. js is the JSON the error's offset points into. Errors of other
// kinds come back as they are, but for a duration's.
func describeDecodeError(js []byte, err error) error {
	te, ok := err.(*json.UnmarshalTypeError)
	if !ok {
		// metav1.Duration's parse error names the value but no field: the
		// field is the duration whose value the error quotes.
		if strings.HasPrefix(err.Error(), "time: ") {
			return fmt.Errorf("%s: %w", durationFieldOf(js, err), err)
		}
		return err
	}
	// A duration's own decoder reports a non-string value with an offset
	// into the value alone, which would name another field: the duration
	// fields are looked up by what they hold.
	if te.Type != nil && te.Type.Kind() == reflect.String {
		if f, literal, ok := nonStringDuration(js); ok {
			if strings.HasPrefix(literal, "a ") || strings.HasPrefix(literal, "an ") {
				return fmt.Errorf("%s: must be a duration such as \"30s\", not %s", f, literal)
			}
			return fmt.Errorf("%s: %s must be a duration such as \"30s\"", f, literal)
		}
	}
	path, literal := "", ""
	if te.Offset > 0 {
		path, literal = valueAt(js, te.Offset)
	}
	if path == "" {
		// A type error of an UnmarshalJSON method (SignalMap) has no offset;
		// the field path the decoder added lacks indices only inside lists.
		path, literal = te.Field, kindInWords[te.Value]
	}
	want := wantInWords(te.Type, literal)
	if literal == "" || strings.HasPrefix(literal, "a ") || strings.HasPrefix(literal, "an ") {
		// "must be a string, not a list" reads better than "a list must be".
		if literal == "" {
			literal = te.Value
		}
		return fmt.Errorf("%s: %s, not %s", path, want, literal)
	}
	return fmt.Errorf("%s: %s %s", path, literal, want)
}

// durationFields are the file's duration fields, in the order they are
// decoded.
var durationFields = []string{"evictionPressureTransitionPeriod", "evictionStallWindow", "memoryHighWindow", "memoryHighGracePeriod", "evictionRequestResponderWait"}

// durationFieldOf names the duration field whose value err quotes (the
// first one decoded when several hold the same bad value).
func durationFieldOf(js []byte, err error) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(js, &top) == nil {
		for _, f := range durationFields {
			var v string
			if raw, ok := top[f]; ok && json.Unmarshal(raw, &v) == nil && strings.Contains(err.Error(), strconv.Quote(v)) {
				return f
			}
		}
	}
	return strings.Join(durationFields, " or ")
}

// nonStringDuration finds the first duration field of js that holds
// something other than a string, and that value in words.
func nonStringDuration(js []byte) (field, literal string, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(js, &top) != nil {
		return "", "", false
	}
	for _, f := range durationFields {
		raw, found := top[f]
		if !found || len(raw) == 0 || raw[0] == '"' || string(raw) == "null" {
			continue
		}
		switch raw[0] {
		case '[':
			return f, "a list", true
		case '{':
			return f, "an object", true
		}
		return f, string(raw), true
	}
	return "", "", false
}

// kindInWords names the decoder's kinds of JSON value.
var kindInWords = map[string]string{"array": "a list", "object": "an object", "string": "a string", "number": "a number", "bool": "a boolean"}

// wantInWords says what a field of type t wants, given the literal it got.
func wantInWords(t reflect.Type, literal string) string {
	if t == nil {
		return "must be of another type"
	}
	switch t.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		// The decoder gives up on a whole number only when it does not fit.
		if wholeNumber.MatchString(literal) {
			return "is outside the " + t.Kind().String() + " range"
		}
		return "must be a whole number"
	case reflect.Float32, reflect.Float64:
		return "must be a number"
	case reflect.String:
		return "must be a string (quote it: YAML reads yes, no, on, off, y and n as booleans, and digits as numbers)"
	case reflect.Bool:
		return "must be true or false"
	case reflect.Slice, reflect.Array:
		return "must be a list"
	case reflect.Map:
		return "must be a map"
	case reflect.Struct, reflect.Pointer:
		return "must be an object"
	}
	return "must be of another type"
}

// wholeNumber is a JSON integer literal.
var wholeNumber = regexp.MustCompile(`^-?[0-9]+$`)

// frame is one open object or list on the way to a value.
type frame struct {
	object  bool
	key     string // object: the key of the value being read
	wantKey bool   // object: the next string token is a key
	index   int    // list: the index of the next value
}

// valueAt finds the value of js that ends at offset (where the decoder was
// when it gave up on it) and returns its path and, for a scalar, its text;
// for an object or list, its kind. It returns "" when offset is past js.
func valueAt(js []byte, offset int64) (path, literal string) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return "", ""
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			markRead(stack)
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			stack[n-1].key, stack[n-1].wantKey = tok.(string), false
			continue
		}
		// tok is a value: a scalar, or the start of an object or list.
		if dec.InputOffset() >= offset {
			return pathOf(stack), literalOf(tok)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		default:
			markRead(stack)
		}
	}
}

// markRead moves the innermost container past the value just read.
func markRead(stack []frame) {
	if n := len(stack); n > 0 {
		if stack[n-1].object {
			stack[n-1].wantKey = true
		} else {
			stack[n-1].index++
		}
	}
}

func pathOf(stack []frame) string {
	var b strings.Builder
	for _, f := range stack {
		if f.object {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		} else {
			fmt.Fprintf(&b, "[%d]", f.index)
		}
	}
	return b.String()
}

func literalOf(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "a list"
	case string:
		return strconv.Quote(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}
