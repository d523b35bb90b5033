package email

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/emersion/go-msgauth/authres"
	"github.com/emersion/go-msgauth/dkim"
	"golang.org/x/net/publicsuffix"
)

// proven reports whether the From: domain of m vouches for it, and how
// (or why not): a valid DKIM signature aligned with From:, verified here
// with the keys DNS gives, or the topmost Authentication-Results of the
// trusted server saying DMARC, DKIM or SPF passed aligned with From:.
func (a *Adapter) proven(ctx context.Context, raw []byte, m *parsed) (string, bool) {
	_, fromDomain, _ := strings.Cut(m.from, "@")
	var why []string
	if how, ok := a.trustedResults(m, fromDomain); ok {
		return how, true
	} else if how != "" {
		why = append(why, how)
	}
	if how, ok := a.dkimPass(ctx, raw, fromDomain); ok {
		return how, true
	} else {
		why = append(why, how)
	}
	return strings.Join(why, "; "), false
}

// dkimPass verifies the DKIM signatures of raw.
func (a *Adapter) dkimPass(ctx context.Context, raw []byte, fromDomain string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{
		MaxVerifications: 5,
		LookupTXT:        func(name string) ([]string, error) { return a.lookupTXT(ctx, name) },
	})
	if err != nil && len(verifs) == 0 {
		return "dkim: " + err.Error(), false
	}
	if len(verifs) == 0 {
		return "no DKIM signature", false
	}
	var why []string
	for _, v := range verifs {
		switch {
		case v.Err != nil:
			why = append(why, fmt.Sprintf("dkim d=%s: %v", v.Domain, v.Err))
		case !signsFrom(v.HeaderKeys):
			why = append(why, fmt.Sprintf("dkim d=%s does not sign From:", v.Domain))
		case !aligned(v.Domain, fromDomain):
			why = append(why, fmt.Sprintf("dkim d=%s is not the From: domain %s", v.Domain, fromDomain))
		default:
			return "dkim d=" + v.Domain, true
		}
	}
	return strings.Join(why, "; "), false
}

func signsFrom(keys []string) bool {
	for _, k := range keys {
		if strings.EqualFold(strings.TrimSpace(k), "from") {
			return true
		}
	}
	return false
}

// trustedResults reads the topmost Authentication-Results header of the
// trusted server (a receiving server adds its own on top; one further
// down may be the sender's forgery).
func (a *Adapter) trustedResults(m *parsed, fromDomain string) (string, bool) {
	if a.o.TrustedAuthservID == "" {
		return "", false
	}
	for _, v := range m.header.Values("Authentication-Results") {
		id, results, err := authres.Parse(v)
		if err != nil || !strings.EqualFold(id, a.o.TrustedAuthservID) {
			continue
		}
		for _, r := range results {
			switch r := r.(type) {
			case *authres.DMARCResult:
				if r.Value == authres.ResultPass && (r.From == "" || aligned(r.From, fromDomain)) {
					return "dmarc=pass by " + id, true
				}
			case *authres.DKIMResult:
				d := r.Domain
				if d == "" {
					_, d, _ = strings.Cut(r.Identifier, "@")
				}
				if r.Value == authres.ResultPass && d != "" && aligned(d, fromDomain) {
					return "dkim=pass header.d=" + d + " by " + id, true
				}
			case *authres.SPFResult:
				d := r.From
				if i := strings.LastIndexByte(d, '@'); i >= 0 {
					d = d[i+1:]
				}
				if r.Value == authres.ResultPass && d != "" && aligned(d, fromDomain) {
					return "spf=pass smtp.mailfrom=" + d + " by " + id, true
				}
			}
		}
		return "the Authentication-Results of " + id + " show no pass aligned with " + fromDomain, false
	}
	return "no Authentication-Results of " + a.o.TrustedAuthservID, false
}

// aligned reports whether domain d and the From: domain share their
// organisational domain (DMARC's relaxed alignment).
func aligned(d, from string) bool {
	d, from = strings.ToLower(strings.TrimSuffix(d, ".")), strings.ToLower(strings.TrimSuffix(from, "."))
	if d == from {
		return true
	}
	od, err1 := publicsuffix.EffectiveTLDPlusOne(d)
	of, err2 := publicsuffix.EffectiveTLDPlusOne(from)
	return err1 == nil && err2 == nil && od == of
}
