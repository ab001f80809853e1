package gateway

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// bodyForm is the shape of the events in a request body.
type bodyForm int

const (
	// formPostHog is PostHog's capture API: a single event, an array of events, or
	// {"api_key"|"token", "batch": [...], "sent_at"}; JSON or a `data=` form field.
	formPostHog bodyForm = iota
	// formEnvelopes is /v1/events: a JSON array or JSON Lines of envelopes.
	formEnvelopes
	// formOTLP is the envelopes package ingest/otlp mapped from the spans of a /v1/traces
	// request: JSON objects it wrote, parsed as they are.
	formOTLP
)

// payload is a decoded request body: its events, still raw, and the request-level fields.
type payload struct {
	APIKey string            // api_key or token of the body; "" when absent
	SentAt json.RawMessage   // sent_at of the body as sent; nil when absent
	Events []json.RawMessage // the events, in order
}

// httpError is a request-level failure: the request is answered with Status and nothing of
// it is published.
type httpError struct {
	Status int
	Msg    string
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Msg) }

func badRequest(format string, args ...any) *httpError {
	return &httpError{Status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

// meta is what the decoder reads from the request besides the body.
type meta struct {
	ContentEncoding string // Content-Encoding header
	ContentType     string // Content-Type header
	Compression     string // ?compression= query parameter
}

var gzipMagic = []byte{0x1f, 0x8b}

// decodeBody turns a request body (already capped at the body limit) into a payload: inflate,
// then parsePayload. Every failure is an *httpError; the whole body is decoded before anything
// is published.
func decodeBody(form bodyForm, m meta, body []byte, maxInflated int64) (*payload, error) {
	data, err := inflate(form, m, body, maxInflated)
	if err != nil {
		return nil, err
	}
	return parsePayload(form, data)
}

// gzipped reports whether a body is gzip (Content-Encoding, ?compression=gzip-js, or the gzip
// magic bytes), or an *httpError for an encoding the gateway does not take.
func gzipped(m meta, body []byte) (bool, error) {
	gz := false
	switch enc := strings.ToLower(strings.TrimSpace(m.ContentEncoding)); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		gz = true
	default:
		return false, &httpError{Status: http.StatusUnsupportedMediaType, Msg: fmt.Sprintf("unsupported Content-Encoding %s (gzip only)", safetext.Quote(enc))}
	}
	switch c := strings.ToLower(m.Compression); c {
	case "", "base64":
	case "gzip-js", "gzip":
		gz = true
	default:
		return false, &httpError{Status: http.StatusUnsupportedMediaType, Msg: fmt.Sprintf("unsupported compression %s (gzip-js only)", safetext.Quote(c))}
	}
	return gz || bytes.HasPrefix(body, gzipMagic), nil
}

// inflate returns the JSON text of a body: gzip inflated while checking maxInflated (so a gzip
// bomb fails with 413 after at most maxInflated+1 bytes) and, for PostHog bodies, the `data`
// field of a form body unwrapped. Every failure is an *httpError.
func inflate(form bodyForm, m meta, body []byte, maxInflated int64) ([]byte, error) {
	gz, err := gzipped(m, body)
	if err != nil {
		return nil, err
	}
	data := body
	if gz {
		if data, err = gunzip(body, maxInflated); err != nil {
			return nil, err
		}
	} else if int64(len(data)) > maxInflated {
		return nil, &httpError{Status: http.StatusRequestEntityTooLarge, Msg: "body too large"}
	}
	if form == formPostHog {
		if data, err = unwrapForm(m.ContentType, data, maxInflated); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// parsePayload reads the events and request-level fields of a body's JSON text.
func parsePayload(form bodyForm, data []byte) (*payload, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, badRequest("empty body")
	}
	if form == formEnvelopes {
		return decodeEnvelopes(trimmed)
	}
	return decodePostHog(trimmed)
}

// gunzip inflates a gzip body, reading at most max+1 bytes of output.
func gunzip(body []byte, max int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, badRequest("body is not valid gzip: %v", err)
	}
	defer zr.Close()
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(zr, max+1))
	if n > max {
		return nil, &httpError{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("decompressed body exceeds %d bytes", max)}
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, badRequest("gzip body is truncated")
		}
		return nil, badRequest("gzip body is corrupt: %v", err)
	}
	return out.Bytes(), nil
}

// unwrapForm returns the JSON of a PostHog body: the body itself, or the `data` field of a
// form body (application/x-www-form-urlencoded, or a body starting with "data="), the field
// holding JSON or base64 of JSON (older posthog-js and posthog-android send this).
func unwrapForm(contentType string, data []byte, maxInflated int64) ([]byte, error) {
	// A JSON body is JSON whatever its Content-Type says (curl -d sends JSON as a form).
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return data, nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	isForm := mt == "application/x-www-form-urlencoded" || bytes.HasPrefix(data, []byte("data="))
	if !isForm {
		return data, nil
	}
	vals, qerr := parseQuery(string(data), "form body")
	if qerr != nil {
		return nil, qerr
	}
	field := strings.TrimSpace(vals.Get("data"))
	if field == "" {
		return nil, badRequest("form body without a data field")
	}
	switch strings.ToLower(vals.Get("compression")) {
	case "", "base64":
	default:
		return nil, &httpError{Status: http.StatusUnsupportedMediaType, Msg: "unsupported compression in form body (base64 or plain JSON only)"}
	}
	if field[0] == '{' || field[0] == '[' {
		return []byte(field), nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if dec, err := enc.DecodeString(field); err == nil {
			if bytes.HasPrefix(dec, gzipMagic) {
				return gunzip(dec, maxInflated)
			}
			return dec, nil
		}
	}
	return nil, badRequest("form data field is neither JSON nor base64")
}

// decodePostHog reads PostHog's body shapes.
func decodePostHog(data []byte) (*payload, error) {
	p := &payload{}
	switch data[0] {
	case '[':
		if err := json.Unmarshal(data, &p.Events); err != nil {
			return nil, badRequest("bad JSON: %v", err)
		}
		return p, nil
	case '{':
	default:
		return nil, badRequest("bad JSON: the body must be a JSON object or array")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, badRequest("bad JSON: %v", err)
	}
	p.APIKey = stringField(top, "api_key")
	if p.APIKey == "" {
		p.APIKey = stringField(top, "token")
	}
	p.SentAt = top["sent_at"]
	batch, ok := top["batch"]
	if !ok {
		// A single event.
		p.Events = []json.RawMessage{data}
		return p, nil
	}
	if err := json.Unmarshal(batch, &p.Events); err != nil || p.Events == nil {
		return nil, badRequest("batch: must be an array of events")
	}
	return p, nil
}

// decodeEnvelopes reads /v1/events: a JSON array, one JSON object, or JSON Lines.
func decodeEnvelopes(data []byte) (*payload, error) {
	p := &payload{}
	if data[0] == '[' {
		if err := json.Unmarshal(data, &p.Events); err != nil {
			return nil, badRequest("bad JSON: %v", err)
		}
		return p, nil
	}
	if data[0] == '{' && json.Valid(data) {
		p.Events = []json.RawMessage{data}
		return p, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		p.Events = append(p.Events, json.RawMessage(bytes.Clone(line)))
	}
	if err := sc.Err(); err != nil {
		return nil, badRequest("reading JSON Lines: %v", err)
	}
	return p, nil
}

// stringField returns obj[name] when it is a JSON string, else "".
func stringField(obj map[string]json.RawMessage, name string) string {
	raw, ok := obj[name]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
