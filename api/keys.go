package api

import (
	"bytes"
	"reflect"
)

// maxCleanKeys bounds the keys cleanKeys compares pairwise in one object;
// an object with more goes to checkKeys.
const maxCleanKeys = 16

// cleanKeys reports whether data, a JSON value that encoding/json has
// just decoded into a t without error, has only keys that name a field of
// their object's type exactly, each once per object: what checkKeys
// requires, found in one pass without allocating. False means "not
// sure" (an escaped key, more than maxCleanKeys keys, or a refusal), and
// checkKeys then decides and says why.
func cleanKeys(data []byte, t reflect.Type) bool {
	k := keyScan{data: data}
	return k.value(t)
}

// keyScan walks valid JSON.
type keyScan struct {
	data []byte
	i    int
}

func (k *keyScan) space() {
	for k.i < len(k.data) {
		switch k.data[k.i] {
		case ' ', '\t', '\n', '\r':
			k.i++
		default:
			return
		}
	}
}

func (k *keyScan) value(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	k.space()
	if k.i >= len(k.data) {
		return false
	}
	switch k.data[k.i] {
	case '{':
		return k.object(t)
	case '[':
		return k.array(elemType(t))
	case '"':
		_, ok := k.str()
		return ok
	default: // a number, true, false or null
		for ; k.i < len(k.data); k.i++ {
			switch k.data[k.i] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return true
			}
		}
		return true
	}
}

// str reads a string at k.i and returns its raw bytes; false if it holds
// an escape, which only checkKeys decodes.
func (k *keyScan) str() ([]byte, bool) {
	start := k.i + 1
	end := bytes.IndexByte(k.data[start:], '"')
	if end < 0 {
		return nil, false
	}
	s := k.data[start : start+end]
	if bytes.IndexByte(s, '\\') >= 0 {
		return nil, false
	}
	k.i = start + end + 1
	return s, true
}

func (k *keyScan) object(t reflect.Type) bool {
	k.i++ // {
	var seenBuf [maxCleanKeys][]byte
	seen := seenBuf[:0]
	for {
		k.space()
		if k.i >= len(k.data) {
			return false
		}
		switch k.data[k.i] {
		case '}':
			k.i++
			return true
		case ',':
			k.i++
			continue
		}
		key, ok := k.str()
		if !ok || len(seen) == maxCleanKeys {
			return false
		}
		for _, s := range seen {
			if bytes.Equal(s, key) {
				return false
			}
		}
		seen = append(seen, key)
		elem, ok := valueType(t, key)
		if !ok {
			return false
		}
		k.space()
		if k.i >= len(k.data) || k.data[k.i] != ':' {
			return false
		}
		k.i++
		if !k.value(elem) {
			return false
		}
	}
}

func (k *keyScan) array(elem reflect.Type) bool {
	k.i++ // [
	for {
		k.space()
		if k.i >= len(k.data) {
			return false
		}
		switch k.data[k.i] {
		case ']':
			k.i++
			return true
		case ',':
			k.i++
			continue
		}
		if !k.value(elem) {
			return false
		}
	}
}
