// Package playground serves the Docstream playground: a single page at "/"
// that sends prompts to the gateway and renders the document stream live.
//
// The page is built from ./web by `npm run build` into ./dist, which is
// committed and embedded into the binary; `gateway/e2e/run.sh` checks that the
// committed dist matches a fresh build.
package playground

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// AssetPrefix is the URL path under which the page's assets are served.
const AssetPrefix = "/assets/"

const (
	cacheNoCache   = "no-cache"
	cacheImmutable = "public, max-age=31536000, immutable"

	// The page talks only to its own origin; markdown from a stream is
	// sanitized in the page, and this policy is the second line.
	contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
		"img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

// hashedName matches the content-hashed names the bundler writes
// (main-URZ2XMH6.js): such a file never changes, so it may be cached for good.
var hashedName = regexp.MustCompile(`-[A-Z0-9]{8}\.[a-z0-9]+$`)

var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".woff2": "font/woff2",
	".txt":   "text/plain; charset=utf-8",
}

// file is one file of dist, with the headers it is served with.
type file struct {
	data        []byte
	contentType string
	cache       string
	etag        string
}

// handler holds the files of dist by their paths in it.
type handler map[string]*file

// Handler serves dist/index.html at "/" and the files of dist/assets under
// /assets/, the two paths the gateway routes to it. Any other path is 404;
// methods other than GET and HEAD are 405.
func Handler() http.Handler {
	root, err := fs.Sub(dist, "dist")
	h := handler{}
	if err == nil {
		err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := fs.ReadFile(root, p)
			cache := cacheNoCache
			if hashedName.MatchString(p) {
				cache = cacheImmutable
			}
			sum := sha256.Sum256(data)
			h[p] = &file{data: data, contentType: cmp.Or(contentTypes[path.Ext(p)], "application/octet-stream"),
				cache: cache, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
			return err
		})
	}
	if err == nil && h["index.html"] == nil {
		err = fmt.Errorf("dist/index.html: %w", fs.ErrNotExist)
	}
	if err != nil {
		// The embedded tree is fixed at build time; the handler test covers it.
		panic("playground: " + err.Error())
	}
	return h
}

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var f *file
	switch p := r.URL.Path; {
	case p == "/":
		f = h["index.html"]
	case strings.HasPrefix(p, AssetPrefix):
		f = h[strings.TrimPrefix(p, "/")]
	}
	if f == nil {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("Cache-Control", f.cache)
	hdr.Set("ETag", f.etag)
	hdr.Set("X-Content-Type-Options", "nosniff")
	if r.URL.Path == "/" {
		hdr.Set("Content-Security-Policy", contentSecurityPolicy)
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("X-Frame-Options", "DENY")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.data))
}
