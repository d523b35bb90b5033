package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Transcribe turns audio into text through the server's OpenAI-compatible
// /audio/transcriptions endpoint (Whisper and compatible servers). name is
// the file name, whose extension tells the server the format.
func (c *Client) Transcribe(ctx context.Context, model, name string, audio []byte) (string, error) {
	if model == "" {
		return "", errors.New("llm: transcribe: no transcription model is configured")
	}
	if name == "" {
		name = "voice.ogg"
	}
	resp, err := c.api.CreateTranscription(ctx, openai.AudioRequest{Model: model, FilePath: name,
		Reader: bytes.NewReader(audio), Format: openai.AudioResponseFormatJSON})
	if err != nil {
		return "", c.redact.Err(fmt.Errorf("llm: transcribe with %s: %w", model, err))
	}
	return strings.TrimSpace(resp.Text), nil
}
