package llm_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

func TestTranscribe(t *testing.T) {
	fake := testkit.NewFakeLLM(t)
	c, err := llm.New(llm.Config{BaseURL: fake.URL, APIKey: "sk-transcribe-secret", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	fake.SetTranscript(" Remind me to call mum. ")
	got, err := c.Transcribe(t.Context(), "whisper-1", "voice.ogg", []byte("OggS-audio"))
	if err != nil || got != "Remind me to call mum." {
		t.Fatalf("Transcribe = %q, %v", got, err)
	}
	reqs := fake.AudioRequests()
	if len(reqs) != 1 || reqs[0].Model != "whisper-1" || reqs[0].FileName != "voice.ogg" || string(reqs[0].Data) != "OggS-audio" {
		t.Fatalf("request = %+v", reqs)
	}
	fake.SetTranscript("")
	if _, err := c.Transcribe(t.Context(), "whisper-1", "v.ogg", []byte("x")); err == nil || strings.Contains(err.Error(), "sk-transcribe-secret") {
		t.Fatalf("error = %v", err)
	}
	if _, err := c.Transcribe(t.Context(), "", "v.ogg", []byte("x")); err == nil {
		t.Fatal("no model: want an error")
	}
}
