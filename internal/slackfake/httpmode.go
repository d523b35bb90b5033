package slackfake

import (
	"context"
	"encoding/json"
	"net/url"
	"time"
)

// httpAckTimeout is how long Slack waits for a Request URL's answer
// before it counts the delivery as failed ("respond within 3 seconds").
const httpAckTimeout = 3 * time.Second

// httpRetries is how many times Slack retries an Events API delivery.
const httpRetries = 3

// SetEventsURL switches delivery from Socket Mode to HTTP, as an app with
// Request URLs gets it: events_api envelopes are POSTed as signed JSON to
// eventsURL, interactive ones (Click) form-encoded (payload=…) to
// interactivityURL, and slash commands as a form of their fields to
// interactivityURL too (on Slack, to the command's Request URL); ""
// keeps that kind on Socket Mode. A delivery counts as acknowledged
// when the answer is 2xx within 3 s; otherwise it is sent again after
// SetRedelivery's after with X-Slack-Retry-Num 1, 2, 3 (Slack waits
// about 1 and 5 minutes between them and stops after 3, as here unless
// SetRedelivery sets another cap). Envelopes, WaitAcked and WaitAllAcked
// cover them as for Socket Mode.
func (f *Fake) SetEventsURL(eventsURL, interactivityURL, signingSecret string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eventsURL, f.interactURL, f.signingSecret = eventsURL, interactivityURL, signingSecret
}

// httpTargetLocked is where e goes over HTTP, "" for Socket Mode; f.mu
// must be held.
func (f *Fake) httpTargetLocked(e *envelope) string {
	switch e.Type {
	case EnvelopeEventsAPI:
		return f.eventsURL
	case EnvelopeInteractive, EnvelopeSlashCommands:
		return f.interactURL
	}
	return ""
}

// postEnvelope delivers e over HTTP until it is acknowledged, given up or
// the fake closes.
func (f *Fake) postEnvelope(e *envelope, target string) {
	defer f.wg.Done()
	f.mu.Lock()
	secret, after := f.signingSecret, f.redeliverAfter
	limit := f.maxRetries
	f.mu.Unlock()
	if limit <= 0 {
		limit = httpRetries
	}
	contentType, body := "application/json", []byte(e.Payload)
	switch e.Type {
	case EnvelopeInteractive:
		contentType = "application/x-www-form-urlencoded"
		body = []byte(url.Values{"payload": {string(e.Payload)}}.Encode())
	case EnvelopeSlashCommands: // a form of the command's fields
		var fields map[string]string
		_ = json.Unmarshal(e.Payload, &fields)
		form := url.Values{}
		for k, v := range fields {
			form.Set(k, v)
		}
		contentType, body = "application/x-www-form-urlencoded", []byte(form.Encode())
	}
	for attempt := 0; ; attempt++ {
		f.mu.Lock()
		e.markSent()
		f.notify()
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(f.ctx, httpAckTimeout)
		status, answer, err := postRead(ctx, target, contentType, secret, body, attempt)
		cancel()
		if err == nil && status/100 == 2 {
			var payload json.RawMessage
			if json.Valid([]byte(answer)) {
				payload = json.RawMessage(answer)
			}
			f.ack(e.ID, payload)
			return
		}
		if attempt >= limit {
			f.mu.Lock()
			e.Dropped = true
			f.notify()
			f.mu.Unlock()
			return
		}
		t := time.NewTimer(after)
		select {
		case <-t.C:
		case <-f.ctx.Done():
			t.Stop()
			return
		}
	}
}
