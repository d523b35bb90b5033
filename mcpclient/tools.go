package mcpclient

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxToolName is the longest function name OpenAI-compatible APIs accept
// (^[a-zA-Z0-9_-]{1,64}$).
const maxToolName = 64

// hashLen is the number of hex digits of the suffix that keeps a truncated
// name unique: 32 bits make an accidental clash between two long names of
// one deployment vanishingly unlikely while leaving 55 readable characters.
const hashLen = 8

// toolName is the model-facing name of a server's tool: "<server>__<tool>",
// with every character outside [a-zA-Z0-9_-] replaced by "_". A name longer
// than 64 characters keeps its first 55 and ends in "_" and a hash of the
// original pair, so the same input always yields the same name.
func toolName(server, tool string) string {
	name := sanitize(server) + "__" + sanitize(tool)
	if len(name) <= maxToolName {
		return name
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	return name[:maxToolName-hashLen-1] + "_" + hex.EncodeToString(sum[:])[:hashLen]
}

// sanitize replaces each character (rune) outside [a-zA-Z0-9_-] by "_".
func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// description is the model-facing description: the server's name in
// brackets, then the tool's description (or its title or name when the
// server gave none).
func description(server string, t *mcp.Tool) string {
	text := t.Description
	if text == "" && t.Annotations != nil {
		text = t.Annotations.Title
	}
	return "[" + server + "] " + cmp.Or(text, t.Title, t.Name)
}

// parameters encodes the tool's input schema; nil means "no arguments".
func parameters(t *mcp.Tool) (json.RawMessage, error) {
	if t.InputSchema == nil {
		return nil, nil
	}
	b, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("encode input schema: %w", err)
	}
	if string(b) == "null" {
		return nil, nil
	}
	return b, nil
}

// readOnly reports whether the server says the tool does not modify its
// environment; only such tools may run in parallel with their neighbours.
func readOnly(t *mcp.Tool) bool {
	return t.Annotations != nil && t.Annotations.ReadOnlyHint
}

// resultText renders a tool result for the model: text parts joined by
// newlines, other parts described in one bracketed line each. When there is
// no content at all, the structured content is shown as JSON.
func resultText(res *mcp.CallToolResult) string {
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		parts = append(parts, contentText(c))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

func contentText(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", cmp.Or(c.MIMEType, "unknown type"), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", cmp.Or(c.MIMEType, "unknown type"), len(c.Data))
	case *mcp.ResourceLink:
		return "[resource link: " + describe(c.URI, c.Name, c.MIMEType) + "]"
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[resource]"
		}
		if r.Blob == nil {
			// An embedded text resource is text the model can read.
			return "[resource: " + describe(r.URI, "", r.MIMEType) + "]\n" + r.Text
		}
		return fmt.Sprintf("[resource: %s, %d bytes]", describe(r.URI, "", r.MIMEType), len(r.Blob))
	default:
		kind := "unknown"
		if b, err := c.MarshalJSON(); err == nil {
			var head struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(b, &head) == nil && head.Type != "" {
				kind = head.Type
			}
		}
		return "[" + kind + " content]"
	}
}

// describe lists the non-empty fields, comma-separated.
func describe(fields ...string) string {
	var out []string
	for _, f := range fields {
		if f != "" {
			out = append(out, f)
		}
	}
	return strings.Join(out, ", ")
}
