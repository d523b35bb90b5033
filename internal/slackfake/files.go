package slackfake

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// File is a file in the workspace, as message events list it.
type File struct {
	ID                 string
	Name               string
	Title              string
	Mimetype           string
	Size               int
	URLPrivate         string // served by the fake, only with the bot token
	URLPrivateDownload string
}

// Upload is a file the bot uploaded through the external upload flow.
type Upload struct {
	File
	Data           []byte
	Channel        string // channel_id of files.completeUploadExternal; "" when not shared
	ThreadTS       string
	InitialComment string
}

type storedFile struct {
	File
	data     []byte
	uploaded bool // bytes arrived at the upload URL
	upload   int  // index in f.uploads + 1 when it is the bot's upload
}

// AddFile stores a file a user shares (put it in UserMessage.Files); its
// url_private is on the fake and requires the bot token.
func (f *Fake) AddFile(name, mimetype string, data []byte) File {
	f.mu.Lock()
	defer f.mu.Unlock()
	sf := f.newFileLocked(name, mimetype)
	sf.data = slices.Clone(data)
	sf.Size = len(data)
	sf.uploaded = true
	return sf.File
}

func (f *Fake) newFileLocked(name, mimetype string) *storedFile {
	id := f.nextIDLocked("F")
	u := f.URL + "/files-pri/" + TeamID + "-" + id + "/" + url.PathEscape(name)
	sf := &storedFile{File: File{ID: id, Name: name, Title: name, Mimetype: mimetype,
		URLPrivate: u, URLPrivateDownload: u + "?download=1"}}
	f.files[id] = sf
	return sf
}

// filesJSON is files as Slack's file objects.
func filesJSON(files []File) []any {
	out := make([]any, len(files))
	for i, fl := range files {
		ext := strings.TrimPrefix(path.Ext(fl.Name), ".")
		out[i] = map[string]any{
			"id": fl.ID, "created": time.Now().Unix(), "timestamp": time.Now().Unix(), "name": fl.Name,
			"title": fl.Title, "mimetype": fl.Mimetype, "filetype": ext, "pretty_type": strings.ToUpper(ext),
			"user": "", "mode": "hosted", "editable": false, "is_external": false, "external_type": "",
			"size": fl.Size, "url_private": fl.URLPrivate, "url_private_download": fl.URLPrivateDownload,
		}
	}
	return out
}

// handleFile serves url_private: with the bot token (and files:read) the
// bytes; otherwise a redirect to the sign-in page, as files.slack.com does.
func (f *Fake) handleFile(w http.ResponseWriter, r *http.Request) {
	team, name := r.PathValue("team"), r.PathValue("name")
	id, _ := strings.CutPrefix(team, TeamID+"-")
	f.mu.Lock()
	var file File
	var data []byte
	sf := f.files[id]
	found := sf != nil && sf.uploaded && sf.Name == name
	if found {
		file, data = sf.File, sf.data
	}
	canRead := slices.Contains(f.scopes, "files:read")
	f.mu.Unlock()
	if !found {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+BotToken || !canRead {
		http.Redirect(w, r, "/signin?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
		return
	}
	w.Header().Set("Content-Type", file.Mimetype)
	http.ServeContent(w, r, file.Name, time.Time{}, bytes.NewReader(data))
}

func (f *Fake) handleSignin(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<html><body>Sign in to Fake Workspace</body></html>")
}

func (f *Fake) getUploadURL(p params) result {
	name := p["filename"]
	n, err := strconv.Atoi(p["length"])
	if name == "" || err != nil || n <= 0 {
		return fail("invalid_arguments")
	}
	mt := mime.TypeByExtension(path.Ext(name))
	if mt == "" {
		mt = "application/octet-stream"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sf := f.newFileLocked(name, mt)
	sf.Size = n
	return ok(map[string]any{"upload_url": f.URL + "/upload/v1/" + sf.ID, "file_id": sf.ID})
}

// handleUpload takes the bytes of an external upload: a multipart form
// (slack-go sends field "file") or a raw body.
func (f *Fake) handleUpload(w http.ResponseWriter, r *http.Request) {
	var data []byte
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		if err := r.ParseMultipartForm(64 << 20); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		for _, fhs := range r.MultipartForm.File {
			if len(fhs) == 0 {
				continue
			}
			fh, err := fhs[0].Open()
			if err == nil {
				data, _ = io.ReadAll(fh)
				fh.Close()
			}
			break
		}
	} else {
		data, _ = io.ReadAll(r.Body)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sf := f.files[r.PathValue("id")]
	if sf == nil || sf.uploaded {
		http.Error(w, "unknown upload", http.StatusNotFound)
		return
	}
	sf.data = data
	sf.Size = len(data)
	sf.uploaded = true
	f.notify()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "OK - "+strconv.Itoa(len(data)))
}

func (f *Fake) completeUpload(p params) result {
	var files []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if json.Unmarshal([]byte(p["files"]), &files) != nil || len(files) == 0 {
		return fail("invalid_arguments")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []any
	for _, fl := range files {
		sf := f.files[fl.ID]
		if sf == nil || !sf.uploaded || sf.upload != 0 {
			return fail("file_not_found")
		}
		if fl.Title != "" {
			sf.Title = fl.Title
		}
		f.uploads = append(f.uploads, Upload{File: sf.File, Data: slices.Clone(sf.data), Channel: p["channel_id"],
			ThreadTS: p["thread_ts"], InitialComment: p["initial_comment"]})
		sf.upload = len(f.uploads)
		out = append(out, map[string]any{"id": sf.ID, "title": sf.Title})
	}
	f.notify()
	return ok(map[string]any{"files": out})
}

// Uploads returns the files the bot uploaded and completed, in order.
func (f *Fake) Uploads() []Upload {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Upload, len(f.uploads))
	for i, u := range f.uploads {
		out[i] = u
		out[i].Data = slices.Clone(u.Data)
	}
	return out
}
