package misuse

import (
	"bytes"
	"errors"

	"github.com/go-json-experiment/json/jsontext"
)

// tokens is how the walker reads an arguments document: jsontext's decoder, which checks the
// grammar as it goes (any input), or boundaries, which only finds where tokens end (a document
// known to be valid JSON: Call.Valid). On valid JSON both read the same tokens.
type tokens interface {
	// PeekKind is the kind of the next token ('{', '}', '[', ']', '"', '0', 't', 'f', 'n'),
	// 0 at the end of the input or on a syntax error.
	PeekKind() jsontext.Kind
	// ReadDelim reads the next token, a delimiter ('{', '}', '[', ']').
	ReadDelim() error
	// ReadValue reads the next value (a member name included) and returns its raw bytes,
	// valid until the next read.
	ReadValue() ([]byte, error)
	// SkipValue reads the next value without returning it.
	SkipValue() error
}

// checked reads with jsontext's decoder.
type checked struct{ dec *jsontext.Decoder }

func (c checked) PeekKind() jsontext.Kind { return c.dec.PeekKind() }
func (c checked) ReadDelim() error {
	_, err := c.dec.ReadToken()
	return err
}
func (c checked) ReadValue() ([]byte, error) { return c.dec.ReadValue() }
func (c checked) SkipValue() error           { return c.dec.SkipValue() }

// boundaries reads a document that is valid JSON (RFC 8259; strings may hold invalid UTF-8
// and unpaired surrogate escapes, as jsontext.AllowInvalidUTF8 allows). It checks nothing:
// separators (',' and ':') are skipped as whitespace, a string ends at the first quote not
// escaped, a container where its brackets balance outside strings. On input that is not valid
// JSON it returns some tokens and no error, or errUnexpectedEnd.
type boundaries struct {
	b []byte
	i int
}

var errUnexpectedEnd = errors.New("unexpected end of the arguments")

func (t *boundaries) reset(doc []byte) { t.b, t.i = doc, 0 }

func (t *boundaries) PeekKind() jsontext.Kind {
	b, i := t.b, t.i
	for ; i < len(b); i++ {
		switch b[i] {
		case ' ', '\t', '\n', '\r', ',', ':':
			continue
		}
		break
	}
	t.i = i
	if i == len(b) {
		return 0
	}
	switch c := b[i]; c {
	case '{', '}', '[', ']', '"', 't', 'f', 'n':
		return jsontext.Kind(c)
	}
	return '0'
}

func (t *boundaries) ReadDelim() error {
	if t.PeekKind() == 0 {
		return errUnexpectedEnd
	}
	t.i++
	return nil
}

func (t *boundaries) ReadValue() ([]byte, error) {
	if t.PeekKind() == 0 {
		return nil, errUnexpectedEnd
	}
	start := t.i
	if err := t.SkipValue(); err != nil {
		return nil, err
	}
	return t.b[start:t.i], nil
}

func (t *boundaries) SkipValue() error {
	if t.PeekKind() == 0 {
		return errUnexpectedEnd
	}
	b, i := t.b, t.i
	switch b[i] {
	case '"':
		end, ok := stringEnd(b, i)
		if !ok {
			return errUnexpectedEnd
		}
		t.i = end
		return nil
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := stringEnd(b, i)
				if !ok {
					return errUnexpectedEnd
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					t.i = i + 1
					return nil
				}
			}
			i++
		}
		return errUnexpectedEnd
	}
	// A number or a literal: up to the next separator, bracket or whitespace.
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
			t.i = i
			return nil
		}
		i++
	}
	t.i = i
	return nil
}

// stringEnd returns the offset just after the string starting at b[i] (a '"'): its first
// quote not escaped, that is, preceded by an even number of backslashes.
func stringEnd(b []byte, i int) (int, bool) {
	for j := i + 1; ; {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return len(b), false
		}
		j += q
		n := 0
		for k := j - 1; k > i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, true
		}
		j++
	}
}
