package mailfake

import (
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS is a UDP DNS server on 127.0.0.1 that answers TXT questions from a
// map (name → records; names without the trailing dot, any case) and
// NXDOMAIN otherwise.
type DNS struct {
	conn *net.UDPConn

	mu      sync.Mutex
	records map[string][]string
	asked   int
}

// NewDNS starts a DNS server with records; it stops when the test ends.
func NewDNS(t testing.TB, records map[string][]string) *DNS {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("mailfake: dns listen: %v", err)
	}
	d := &DNS{conn: conn, records: map[string][]string{}}
	for name, txt := range records {
		d.Set(name, txt...)
	}
	go d.serve()
	t.Cleanup(func() { conn.Close() })
	return d
}

// Addr is the server's host:port.
func (d *DNS) Addr() string { return d.conn.LocalAddr().String() }

// Set replaces the TXT records of name.
func (d *DNS) Set(name string, txt ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records[strings.ToLower(strings.TrimSuffix(name, "."))] = txt
}

// Asked counts the questions answered.
func (d *DNS) Asked() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked
}

func (d *DNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if out, ok := d.answer(buf[:n]); ok {
			d.conn.WriteToUDP(out, from) //nolint:errcheck // the client asks again
		}
	}
}

func (d *DNS) answer(query []byte) ([]byte, bool) {
	var q dnsmessage.Message
	if err := q.Unpack(query); err != nil || len(q.Questions) != 1 {
		return nil, false
	}
	question := q.Questions[0]
	name := strings.ToLower(strings.TrimSuffix(question.Name.String(), "."))
	d.mu.Lock()
	txt, found := d.records[name]
	d.asked++
	d.mu.Unlock()
	resp := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true, RecursionDesired: q.RecursionDesired, RecursionAvailable: true},
		Questions: q.Questions,
	}
	switch {
	case !found:
		resp.RCode = dnsmessage.RCodeNameError
	case question.Type == dnsmessage.TypeTXT:
		for _, rec := range txt {
			resp.Answers = append(resp.Answers, dnsmessage.Resource{
				Header: dnsmessage.ResourceHeader{Name: question.Name, Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassINET, TTL: 60},
				Body:   &dnsmessage.TXTResource{TXT: chunks(rec, 255)},
			})
		}
	}
	out, err := resp.Pack()
	return out, err == nil
}

// chunks cuts s into the character-strings of a TXT record (255 bytes at
// most each); resolvers join them again.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}
