package email

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

// multipart builds a multipart/mixed mail: an alternative text part and a
// base64 attachment.
func multipart(plain, html string, name string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("From: Alice <alice@example.org>\r\nTo: bot@bot.example\r\nSubject: files\r\nMessage-ID: <mp@example.org>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=outer\r\n\r\n--outer\r\n" +
		"Content-Type: multipart/alternative; boundary=inner\r\n\r\n")
	if plain != "" {
		b.WriteString("--inner\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + plain + "\r\n")
	}
	b.WriteString("--inner\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + html + "\r\n--inner--\r\n")
	if name != "" {
		b.WriteString("--outer\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"" + name +
			"\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
		enc := base64.StdEncoding.EncodeToString(data)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	}
	b.WriteString("--outer--\r\n")
	return b.Bytes()
}

func TestParseMail(t *testing.T) {
	big := make([]byte, 3<<20) // 3 MB, as the acceptance test sends
	rand.Read(big)
	for _, tc := range []struct {
		name     string
		raw      []byte
		max      int64
		text     string
		files    []channels.Attachment
		wantData []byte
	}{
		{name: "plain beside html", raw: multipart("the plain text", "<p>the html</p>", "", nil), max: 1 << 20, text: "the plain text"},
		{name: "html only", raw: multipart("", "<html><head><style>p{}</style></head><body><p>Hello <b>there</b>,</p><p>see <a href=\"https://example.org/x\">the page</a>.<br>Bye</p><blockquote>old text</blockquote></body></html>", "", nil),
			max: 1 << 20, text: "Hello there,\n\nsee the page (https://example.org/x).\nBye"},
		{name: "3 MB attachment", raw: multipart("see attached", "", "scan.pdf", big), max: 25 << 20, text: "see attached",
			files: []channels.Attachment{{Kind: channels.File, Name: "scan.pdf", MIME: "application/pdf", Size: 3 << 20}}},
		{name: "an image keeps its bytes", raw: bytes.Replace(multipart("look", "", "cat.png", big[:1000]), []byte("application/pdf"), []byte("image/png"), 1),
			max: 25 << 20, text: "look", files: []channels.Attachment{{Kind: channels.Image, Name: "cat.png", MIME: "image/png", Size: 1000}}, wantData: big[:1000]},
		{name: "a text file is read", raw: bytes.Replace(multipart("the log", "", "app.log", []byte("line 1\nline 2\n")), []byte("application/pdf"), []byte("application/octet-stream"), 1),
			max: 25 << 20, text: "the log", files: []channels.Attachment{{Kind: channels.File, Name: "app.log", MIME: "application/octet-stream", Size: 14, Text: "line 1\nline 2\n"}}},
		{name: "attachment above the cap", raw: multipart("see attached", "", "scan.pdf", big), max: 1 << 20, text: "see attached",
			files: []channels.Attachment{{Kind: channels.File, Name: "scan.pdf", MIME: "application/pdf", Size: 3 << 20,
				Note: "larger than the 1 MiB an attachment may have; not read"}}},
		{name: "latin-1, quoted-printable", raw: []byte("From: b@example.org\r\nSubject: x\r\nContent-Type: text/plain; charset=iso-8859-1\r\n" +
			"Content-Transfer-Encoding: quoted-printable\r\n\r\nGr=FC=DFe aus K=F6ln\r\n"), max: 1 << 20, text: "Grüße aus Köln"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parseMail(tc.raw, tc.max)
			if err != nil || m.bodyErr != nil {
				t.Fatalf("parseMail: %v %v", err, m.bodyErr)
			}
			if m.text != tc.text {
				t.Errorf("text %q\nwant %q", m.text, tc.text)
			}
			if len(m.attachments) != len(tc.files) {
				t.Fatalf("%d attachments, want %d", len(m.attachments), len(tc.files))
			}
			for i, want := range tc.files {
				got := m.attachments[i]
				data := got.Data
				got.Data = nil
				if got.Kind != want.Kind || got.Name != want.Name || got.MIME != want.MIME || got.Size != want.Size || got.Note != want.Note || got.Text != want.Text {
					t.Errorf("attachment %+v\nwant %+v", got, want)
				}
				if tc.wantData != nil && !bytes.Equal(data, tc.wantData) {
					t.Errorf("attachment data differs (%d bytes)", len(data))
				}
			}
		})
	}
	for _, bad := range []string{"Subject: no sender\r\n\r\nhi", "From: a@example.org, b@example.org\r\n\r\nhi", "From: nobody\r\n\r\nhi"} {
		if _, err := parseMail([]byte(bad), 1<<20); err == nil {
			t.Errorf("parseMail(%q): no error", bad)
		}
	}
}

func TestTrimReply(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"yes\n\nOn Sun, 6 Dec 2026 at 11:00, Bot <bot@bot.example> wrote:\n> Shall I?\n", "yes"},
		{"No.\n-- \nAlice Example\n+1 555", "No."},
		{"ok\n\nSent from my iPhone", "ok"},
		{"sure\n\n-----Original Message-----\nFrom: Bot\nSent: Sunday\n\nShall I?", "sure"},
		{"Fine.\n\nFrom: Bot <bot@bot.example>\nSent: Sunday, 6 December 2026 11:00\nTo: Alice\n> x", "Fine."},
		{"> what time?\nnine\n> and where?\nhere\n\n> old\n> history", "> what time?\nnine\n> and where?\nhere"},
		{"Am So., 6. Dez. 2026 um 11:00 schrieb Bot <bot@bot.example>:\n> x", "Am So., 6. Dez. 2026 um 11:00 schrieb Bot <bot@bot.example>:\n> x"},
		{"ja\r\n\r\nAm So., 6. Dez. 2026 um 11:00 schrieb Bot <bot@bot.example>:\r\n> x", "ja"},
		{"> only a quote", "> only a quote"},
		{"Thanks!\n\nOn Sun, Dec 6, 2026 at 11:00 AM Switchboard Bot <\nbot@bot.example> wrote:\n> x", "Thanks!"},
		{"On Monday I can.\nSee you wrote: soon", "On Monday I can.\nSee you wrote: soon"},
	} {
		if got := trimReply(tc.in); got != tc.want {
			t.Errorf("trimReply(%q) = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestHTMLToText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"<div>one</div><div>two</div>", "one\ntwo"},
		{"<p>a <i>b</i> c</p><ul><li>x</li><li>y</li></ul>", "a b c\nx\ny"},
		{"<p>yes</p><blockquote><p>Shall I?</p></blockquote>", "yes\n\n> Shall I?"},
		{"<script>alert(1)</script><p>safe</p>", "safe"},
		{"<a href=\"https://a.example\">https://a.example</a>", "https://a.example"},
	} {
		if got := htmlToText(tc.in); got != tc.want {
			t.Errorf("htmlToText(%q) = %q\nwant %q", tc.in, got, tc.want)
		}
	}
	if got := trimReply(htmlToText("<p>yes</p><blockquote><p>Shall I?</p></blockquote>")); got != "yes" {
		t.Errorf("an HTML answer with its quote: %q", got)
	}
}

func FuzzParseMail(f *testing.F) {
	f.Add(string(multipart("hi", "<p>hi</p>", "a.pdf", []byte("%PDF"))))
	f.Add("From: a@example.org\r\nReferences: <x@y> <z@w>\r\nIn-Reply-To: <z@w>\r\n\r\nyes\r\n> q")
	f.Fuzz(func(t *testing.T, raw string) {
		m, err := parseMail([]byte(raw), 1<<16)
		if err != nil {
			return
		}
		if strings.Contains(m.from, " ") || !strings.Contains(m.from, "@") {
			t.Errorf("from %q", m.from)
		}
		a := &Adapter{o: Options{Address: botAddr, Now: time.Now}, domain: "bot.example"}
		in := a.inbound(m, 1, 2)
		if to, _, ok := splitChatID(in.ChatID); !ok || to != m.from {
			t.Errorf("chat id %q does not split back to %q", in.ChatID, m.from)
		}
		a.loopReason(m)
	})
}
