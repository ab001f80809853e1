package schemacheck

import (
	"encoding/json"
)

// DefaultContextDescription is the description D of the injected `context` property when a
// server configures none: a text of our own with the shape of the PostHog MCP analytics SDK's
// default (@posthog/mcp 0.16.3, src/extensions/constants.ts,
// DEFAULT_CONTEXT_PARAMETER_DESCRIPTION): 615 characters, plain ASCII, of which 8 are double
// quotes that JSON escapes, so it serializes to 623 characters plus its quotes, exactly as the
// SDK's does. Only the serialized length enters the size, so a server running the SDK's stock
// text is measured exactly (TestDefaultContextDescriptionMatchesSDK checks it against the
// SDK's own recordings); a server that customises the text should configure the same text here.
const DefaultContextDescription = "Explain in one or two plain sentences why you call this tool now and how the call fits the task " +
	"the user gave you: the goal, what you expect this call to return, and how you will use the result. " +
	"Write for the human reviewer who sees only this text and the tool name. Do not repeat the other " +
	"arguments, and do not paste data, secrets, credentials or personal details from the conversation; " +
	"write \"a user\", \"a customer\" or \"an account\" instead of naming anyone. If this call retries an earlier " +
	"call, say what went wrong first. Keep it short and factual, for example: \"Listing recent orders to " +
	"check a refund request.\""

// contextProperty is the name of the injected property.
const contextProperty = "context"

// InjectContext returns schema as the PostHog MCP analytics SDK registers it, serialized as
// JSON.stringify would (see Stringify), and whether anything was injected. It follows issue
// 4, Definitions, "Context injection":
//
//   - Nothing is injected (the input is returned unchanged, false) when the root is not a
//     JSON object, when its `properties` map already declares `context` (whatever its
//     schema), or when the root has a `$ref`, `oneOf`, `anyOf` or `allOf` key.
//   - Otherwise property `context` = {"type":"string","description":D} is added at the END
//     of the root `properties` map. A root without a `properties` object (absent, or not a
//     JSON object) gets a new map holding only `context`, in place of any non-object value,
//     or as a new last key.
//   - "context" is appended to `required` when `required` is an array that does not
//     already contain it; a missing or non-array `required` becomes ["context"].
//   - `additionalProperties` is deleted when, and only when, it is exactly false.
//
// The root need not say "type":"object": the SDK adds the property regardless (a non-object
// root type is reported separately, as a structural problem). An empty description means
// DefaultContextDescription, as in the SDK. Invalid JSON is an error.
func InjectContext(schema json.RawMessage, description string) (json.RawMessage, bool, error) {
	root, err := parseJS(schema)
	if err != nil {
		return nil, false, err
	}
	out, ok := injectContext(root, description)
	if !ok {
		return schema, false, nil
	}
	return appendJS(nil, out), true, nil
}

// injectContext applies the injection to a parsed schema without modifying it: the result
// shares every node except the root, its `properties` map and its `required` array.
func injectContext(root *jsValue, description string) (*jsValue, bool) {
	if !root.isObject() {
		return root, false
	}
	props := root.get("properties")
	if props.isObject() && props.get(contextProperty) != nil {
		return root, false
	}
	for _, k := range [...]string{"$ref", "oneOf", "anyOf", "allOf"} {
		if root.get(k) != nil {
			return root, false
		}
	}
	if description == "" {
		description = DefaultContextDescription
	}
	ctx := &jsValue{kind: jsObject, obj: []jsMember{
		{key: "type", val: &jsValue{kind: jsString, str: "string"}},
		{key: "description", val: &jsValue{kind: jsString, str: description}},
	}}

	newProps := &jsValue{kind: jsObject}
	if props.isObject() {
		newProps.obj = make([]jsMember, len(props.obj), len(props.obj)+1)
		copy(newProps.obj, props.obj)
	}
	newProps.obj = append(newProps.obj, jsMember{key: contextProperty, val: ctx})

	req := root.get("required")
	newReq := &jsValue{kind: jsArray}
	switch {
	case req != nil && req.kind == jsArray:
		has := false
		for _, el := range req.arr {
			if el.kind == jsString && el.str == contextProperty {
				has = true
				break
			}
		}
		if has {
			newReq = req
		} else {
			newReq.arr = make([]*jsValue, len(req.arr), len(req.arr)+1)
			copy(newReq.arr, req.arr)
			newReq.arr = append(newReq.arr, &jsValue{kind: jsString, str: contextProperty})
		}
	default:
		newReq.arr = []*jsValue{{kind: jsString, str: contextProperty}}
	}

	out := &jsValue{kind: jsObject, obj: make([]jsMember, 0, len(root.obj)+2)}
	seenProps, seenReq := false, false
	for _, m := range root.obj {
		switch m.key {
		case "properties":
			m.val, seenProps = newProps, true
		case "required":
			m.val, seenReq = newReq, true
		case "additionalProperties":
			if m.val.kind == jsFalse {
				continue
			}
		}
		out.obj = append(out.obj, m)
	}
	if !seenProps {
		out.obj = append(out.obj, jsMember{key: "properties", val: newProps})
	}
	if !seenReq {
		out.obj = append(out.obj, jsMember{key: "required", val: newReq})
	}
	return out, true
}
