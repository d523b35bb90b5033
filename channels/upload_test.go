package channels_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
)

// ReadUpload reads a file up to the limit and refuses one past it, naming
// the file and whose limit it is.
func TestReadUpload(t *testing.T) {
	dir := t.TempDir()
	small, big := filepath.Join(dir, "small.txt"), filepath.Join(dir, "big.bin")
	if err := os.WriteFile(small, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, 2<<20+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := channels.ReadUpload(small, 2<<20, "Test's limit"); err != nil || string(data) != "hello" {
		t.Errorf("small file: %q, %v", data, err)
	}
	if data, err := channels.ReadUpload(big, 2<<20, "Test's limit"); err == nil || data != nil ||
		!strings.Contains(err.Error(), "big.bin is larger than Test's limit of 2 MiB") {
		t.Errorf("big file: %d bytes, %v; want refused naming the file and the limit", len(data), err)
	}
	if _, err := channels.ReadUpload(filepath.Join(dir, "missing"), 2<<20, "Test's limit"); !os.IsNotExist(err) {
		t.Errorf("missing file: %v, want not-exist", err)
	}
}

// ReplyDigest is the same for the same answer to the same message, differs
// by chat, message, part and text, and is not ok without a message.
func TestReplyDigest(t *testing.T) {
	at := func(id string) context.Context {
		return channels.WithInbound(context.Background(), channels.Inbound{MessageID: id})
	}
	base, ok := channels.ReplyDigest(at("m1"), "c1", "0", "hello")
	if !ok {
		t.Fatal("a Send answering a message has no digest")
	}
	if again, _ := channels.ReplyDigest(at("m1"), "c1", "0", "hello"); again != base {
		t.Error("the same answer sent again has another digest")
	}
	for _, tc := range []struct {
		ctx              context.Context
		chat, part, text string
	}{
		{at("m2"), "c1", "0", "hello"}, {at("m1"), "c2", "0", "hello"},
		{at("m1"), "c1", "1", "hello"}, {at("m1"), "c1", "0", "hello!"},
	} {
		if d, _ := channels.ReplyDigest(tc.ctx, tc.chat, tc.part, tc.text); d == base {
			t.Errorf("%+v has the digest of another part", tc)
		}
	}
	if _, ok := channels.ReplyDigest(context.Background(), "c1", "0", "hello"); ok {
		t.Error("a Send answering no message has a digest")
	}
	if _, ok := channels.ReplyDigest(at(""), "c1", "0", "hello"); ok {
		t.Error("a message without an id gives a digest")
	}
}
