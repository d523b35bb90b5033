package mailfake

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
)

// DKIMKey is a test signing key of a domain and selector.
type DKIMKey struct {
	Domain, Selector string
	key              *rsa.PrivateKey
}

// NewDKIMKey makes an RSA key (2048 bits) for domain and selector.
func NewDKIMKey(t testing.TB, domain, selector string) *DKIMKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("mailfake: dkim key: %v", err)
	}
	return &DKIMKey{Domain: domain, Selector: selector, key: key}
}

// TXTName is where the key's record is published:
// SELECTOR._domainkey.DOMAIN.
func (k *DKIMKey) TXTName() string { return k.Selector + "._domainkey." + k.Domain }

// TXT is the key's DNS record.
func (k *DKIMKey) TXT() string {
	der, err := x509.MarshalPKIXPublicKey(&k.key.PublicKey)
	if err != nil {
		panic(err) // an RSA public key always marshals
	}
	return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der)
}

// Records is a map for NewDNS or a lookup function with this key.
func (k *DKIMKey) Records() map[string][]string {
	return map[string][]string{k.TXTName(): {k.TXT()}}
}

// Sign returns raw with a DKIM-Signature (rsa-sha256, relaxed/relaxed)
// over From, To, Subject, Date, Message-ID, References and In-Reply-To.
func (k *DKIMKey) Sign(t testing.TB, raw []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	err := dkim.Sign(&out, bytes.NewReader(raw), &dkim.SignOptions{
		Domain: k.Domain, Selector: k.Selector, Signer: k.key, Hash: crypto.SHA256,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed, BodyCanonicalization: dkim.CanonicalizationRelaxed,
		HeaderKeys: []string{"From", "To", "Subject", "Date", "Message-ID", "References", "In-Reply-To"},
	})
	if err != nil {
		t.Fatalf("mailfake: dkim sign: %v", err)
	}
	return out.Bytes()
}
