package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/switchboard-gateway/switchboard/channels"
)

const (
	// defaultMaxDownload caps image downloads: a model rarely needs more.
	defaultMaxDownload = 8 << 20
	// maxTextAttachment is the largest text file whose content is inlined.
	maxTextAttachment = 64 << 10
	// maxAttachments caps the files read per message; Slack allows 10.
	maxAttachments = 10
)

// slackFileHost serves url_private; nothing else is fetched with the token.
const slackFileHost = "files.slack.com"

// fileURL refuses a file URL that is not on Slack's file host over https
// or, with an api_url other than Slack's (a fake in tests), on exactly its
// scheme and host: a crafted event cannot make the gateway send the bot
// token anywhere else.
func (a *Adapter) fileURL(u *url.URL) error {
	if (u.Scheme == "https" && u.Host == slackFileHost) || (a.fileHost != "" && u.Scheme+"://"+u.Host == a.fileHost) {
		return nil
	}
	return fmt.Errorf("not fetched: %s://%s is not Slack's file host", u.Scheme, u.Host)
}

// download fetches a file's url_private with the bot token, refusing
// bodies over max bytes.
func (a *Adapter) download(ctx context.Context, raw string, max int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, err
	}
	if err := a.fileURL(req.URL); err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.botToken)
	resp, err := a.files.Do(req)
	if err != nil {
		return nil, errors.New(a.redact(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/html") {
		// Slack answers a request without a valid token with its login page.
		return nil, errors.New("Slack answered with a web page (is the files:read scope granted?)")
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// attachments turns a message's files (the first maxAttachments) into
// ours, downloading images and small text files with get; left counts the
// files past the cap.
func attachments(ctx context.Context, files []slack.File, maxDownload int64, get func(ctx context.Context, url string, max int64) ([]byte, error)) (out []channels.Attachment, left int) {
	for _, f := range files {
		if len(out) >= maxAttachments {
			left++
			continue
		}
		media, _, _ := mime.ParseMediaType(f.Mimetype)
		if media == "" {
			media = mime.TypeByExtension(strings.ToLower(path.Ext(f.Name)))
		}
		if media == "" {
			media = "application/octet-stream"
		}
		at := channels.Attachment{Kind: channels.File, Name: firstNonEmpty(f.Name, f.Title, f.ID), MIME: media, Size: int64(f.Size)}
		src := firstNonEmpty(f.URLPrivateDownload, f.URLPrivate)
		switch {
		case f.Mode == "tombstone" || f.Mode == "hidden_by_limit":
			at.Note = fmt.Sprintf("file %q is no longer available", at.Name)
		case strings.HasPrefix(media, "image/"):
			at.Kind = channels.Image
			if int64(f.Size) > maxDownload {
				at.Note = fmt.Sprintf("image %q (%d bytes) is over the %d-byte download limit", at.Name, f.Size, maxDownload)
				break
			}
			data, err := get(ctx, src, maxDownload)
			if err != nil {
				at.Note = fmt.Sprintf("could not download %q: %v", at.Name, err)
				break
			}
			at.Data = data
		case strings.HasPrefix(media, "audio/"):
			at.Kind, at.Note = channels.Audio, fmt.Sprintf("audio %q was not downloaded", at.Name)
		case strings.HasPrefix(media, "video/"):
			at.Kind, at.Note = channels.Video, fmt.Sprintf("video %q was not downloaded", at.Name)
		case isText(media, at.Name) && f.Size <= maxTextAttachment:
			data, err := get(ctx, src, maxTextAttachment)
			switch {
			case err != nil:
				at.Note = fmt.Sprintf("could not download %q: %v", at.Name, err)
			case !utf8.Valid(data):
				at.Note = fmt.Sprintf("%q is not UTF-8 text", at.Name)
			default:
				at.Text = string(data)
			}
		default:
			at.Note = fmt.Sprintf("file %q (%s, %d bytes) was not downloaded", at.Name, media, f.Size)
		}
		out = append(out, at)
	}
	return out, left
}

func isText(media, name string) bool {
	if strings.HasPrefix(media, "text/") {
		return true
	}
	switch media {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml",
		"application/javascript", "application/x-sh", "application/sql":
		return true
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".txt", ".md", ".csv", ".tsv", ".json", ".yaml", ".yml", ".toml", ".log", ".ini", ".go", ".py", ".js", ".ts", ".sh", ".sql", ".html", ".xml", ".c", ".h", ".rs", ".java":
		return true
	}
	return false
}
