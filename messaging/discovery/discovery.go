// Package discovery is UAMP 1.0 signed discovery (uamp.dev §8):
// the agent manifest at /.well-known/agent-manifest.json, served as a
// compact JWS (application/manifest+jws) signed by the server's identity
// key; the hub at /.well-known/agent-hub.json, listing child manifests and
// the JWK set that verifies them, signed the same way; and the did:web
// document at /.well-known/did.json that publishes the identity key, so a
// client holding nothing but the server's DID can verify both.
//
// A client trusts an endpoint only after Discover verified the hub
// (against its trust anchors, or did:web) and the manifest (against the
// hub's keys):
//
//	d, err := discovery.Discover(ctx, "https://agents.example", discovery.ClientOptions{})
//	// d.Manifest, d.Hub and d.Keys are verified
//
// docs/spec-notes/uamp.md records the shapes the spec leaves open (the
// hub document, its signature, the did:web document).
package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

// The well-known paths (§8) and the did:web document path.
const (
	ManifestPath = "/.well-known/agent-manifest.json"
	HubPath      = "/.well-known/agent-hub.json"
	didPath      = "/.well-known/did.json"
)

// maxDocumentSize bounds every discovery document read.
const maxDocumentSize = 256 << 10

// Hub is the hub document (§8): who publishes it, the child agents'
// manifests, and the JWK set — the trust anchors — their manifests are
// verified with. Sig is a detached JWS over the canonical form of the
// document without sig (envelope.SignDocument), by a key of DID.
type Hub struct {
	DID       string           `json:"did"`
	Manifests []HubEntry       `json:"manifests"`
	Keys      *envelope.KeySet `json:"keys"`
	Sig       string           `json:"sig,omitempty"`
}

// HubEntry names one child agent: its DID and its signed manifest's URL.
type HubEntry struct {
	DID string `json:"did"`
	URL string `json:"url"`
}

// child is an agent a hub lists: its DID and where its manifest is.
type child = HubEntry

// ServerOptions configures Handler.
type ServerOptions struct {
	// DID is the server's identity, a did:web (did:web:host or
	// did:web:host:path…); its key signs everything served.
	DID string
	// Key is the identity key. Its kid should be a DID URL of DID
	// ("did:web:host#key-1"); a bare kid is published as DID + "#" + kid.
	Key *envelope.PrivateKey
	// Manifest is this agent's manifest.
	Manifest envelope.Manifest
	// Children are other agents the hub lists; the server's own manifest
	// is always listed first. ChildKeys are the keys their manifests are
	// signed with (the server's own key is always included).
	Children  []child
	ChildKeys []*envelope.PublicKey
	// BaseURL is the public https URL of the server, used in the hub's
	// entry for its own manifest; default "https://" + the DID's host.
	BaseURL string
}

// Handler serves the manifest, the hub and the did:web document. The
// documents are signed once, when Handler is called.
func Handler(options *ServerOptions) (http.Handler, error) {
	var opts ServerOptions
	if options != nil {
		opts = *options
	}
	if opts.Key == nil {
		return nil, errors.New("discovery: no identity key")
	}
	host, path, err := didWebLocation(opts.DID)
	if err != nil {
		return nil, err
	}
	manifest, err := envelope.SignManifest(&opts.Manifest, opts.Key)
	if err != nil {
		return nil, fmt.Errorf("discovery: signing the manifest: %w", err)
	}
	base := opts.BaseURL
	if base == "" {
		base = "https://" + host + path
	}
	keys, err := envelope.NewKeySet(append([]*envelope.PublicKey{opts.Key.Public()}, opts.ChildKeys...)...)
	if err != nil {
		return nil, fmt.Errorf("discovery: hub keys: %w", err)
	}
	hub := Hub{DID: opts.DID, Manifests: append([]HubEntry{{DID: opts.DID, URL: strings.TrimSuffix(base, "/") + ManifestPath}}, opts.Children...), Keys: keys}
	if hub.Sig, err = envelope.SignDocument(hub, opts.Key); err != nil {
		return nil, fmt.Errorf("discovery: signing the hub: %w", err)
	}
	hubJSON, err := json.Marshal(hub)
	if err != nil {
		return nil, err
	}
	didDoc, err := json.Marshal(didDocument(opts.DID, opts.Key.Public()))
	if err != nil {
		return nil, err
	}
	serve := func(body []byte, contentType string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Cache-Control", "public, max-age=300")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Write(body)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+ManifestPath, serve([]byte(manifest), envelope.ManifestMediaType))
	mux.Handle("GET "+HubPath, serve(hubJSON, "application/json"))
	mux.Handle("GET "+didPath, serve(didDoc, "application/did+json"))
	return mux, nil
}

// didDoc is the part of a DID document (W3C DID Core) did:web needs.
type didDoc struct {
	Context            []string       `json:"@context"`
	ID                 string         `json:"id"`
	VerificationMethod []verification `json:"verificationMethod"`
	AssertionMethod    []string       `json:"assertionMethod"`
}

type verification struct {
	ID           string              `json:"id"`
	Type         string              `json:"type"`
	Controller   string              `json:"controller"`
	PublicKeyJwk *envelope.PublicKey `json:"publicKeyJwk"`
}

func didDocument(did string, key *envelope.PublicKey) didDoc {
	id := key.KID()
	if !strings.HasPrefix(id, did+"#") {
		id = did + "#" + strings.TrimPrefix(id, "#")
	}
	return didDoc{
		Context:            []string{"https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/jws-2020/v1"},
		ID:                 did,
		VerificationMethod: []verification{{ID: id, Type: "JsonWebKey2020", Controller: did, PublicKeyJwk: key}},
		AssertionMethod:    []string{id},
	}
}

// didWebLocation returns the host (with port) and path of a did:web
// (did:web:host[%3Aport][:seg…]).
func didWebLocation(did string) (host, path string, err error) {
	rest, ok := strings.CutPrefix(did, "did:web:")
	if !ok || rest == "" {
		return "", "", fmt.Errorf("discovery: %q is not a did:web", did)
	}
	parts := strings.Split(rest, ":")
	if host, err = url.PathUnescape(parts[0]); err != nil || host == "" || strings.ContainsAny(host, "/?#@") {
		return "", "", fmt.Errorf("discovery: %q has no valid host", did)
	}
	for _, p := range parts[1:] {
		seg, err := url.PathUnescape(p)
		if err != nil || seg == "" || strings.ContainsAny(seg, "/?#") {
			return "", "", fmt.Errorf("discovery: %q has an invalid path segment", did)
		}
		path += "/" + seg
	}
	return host, path, nil
}

// ClientOptions configures Discover and DIDWeb.
type ClientOptions struct {
	// HTTPClient fetches the documents; default a client with a 10 s
	// timeout. Only https URLs are fetched.
	HTTPClient *http.Client
	// Trust verifies the hub; nil resolves the hub's DID with did:web.
	Trust envelope.KeyResolver
}

// Discovery is what Discover verified.
type Discovery struct {
	Hub      *Hub
	Manifest *envelope.Manifest
	// Keys are the hub's keys, the trust anchors of its children.
	Keys *envelope.KeySet
}

// Discover fetches and verifies the hub of the server at baseURL (an
// https URL), then the manifest of the server's own agent (the hub's
// first entry) against the hub's keys. Nothing unverified is returned:
// a bad signature is an *envelope.Error with code 4.01.
func Discover(ctx context.Context, baseURL string, options *ClientOptions) (*Discovery, error) {
	var opts ClientOptions
	if options != nil {
		opts = *options
	}
	c := client(opts)
	b, err := fetch(ctx, c, strings.TrimSuffix(baseURL, "/")+HubPath)
	if err != nil {
		return nil, err
	}
	var raw struct {
		DID       string          `json:"did"`
		Manifests []HubEntry      `json:"manifests"`
		Keys      json.RawMessage `json:"keys"`
		Sig       string          `json:"sig"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, envelope.NewError(envelope.CodeBadRequest, "the hub is not a hub document", err)
	}
	hub := Hub{DID: raw.DID, Manifests: raw.Manifests, Sig: raw.Sig}
	if _, _, err := didWebLocation(hub.DID); err != nil && opts.Trust == nil {
		return nil, envelope.NewError(envelope.CodeUnauthenticated, "the hub names no did:web to verify it by", err)
	}
	trust := opts.Trust
	if trust == nil {
		trust = DIDWeb(&opts)
	}
	if err := envelope.VerifyDocument(ctx, b, hub.DID, trust); err != nil {
		return nil, err
	}
	if len(hub.Manifests) == 0 {
		return nil, envelope.NewError(envelope.CodeBadRequest, "the hub lists no manifest", nil)
	}
	if hub.Keys, err = envelope.ParseKeySet(raw.Keys); err != nil {
		return nil, envelope.NewError(envelope.CodeBadRequest, "the hub's keys are not a JWK set", err)
	}
	m, err := FetchManifest(ctx, hub.Manifests[0], hub.Keys, &opts)
	if err != nil {
		return nil, err
	}
	return &Discovery{Hub: &hub, Manifest: m, Keys: hub.Keys}, nil
}

// FetchManifest fetches the signed manifest of a hub entry and verifies
// it as signed by the entry's DID with keys (a hub's keys).
func FetchManifest(ctx context.Context, entry HubEntry, keys envelope.KeyResolver, options *ClientOptions) (*envelope.Manifest, error) {
	var opts ClientOptions
	if options != nil {
		opts = *options
	}
	b, err := fetch(ctx, client(opts), entry.URL)
	if err != nil {
		return nil, err
	}
	return envelope.OpenManifest(ctx, strings.TrimSpace(string(b)), entry.DID, keys)
}

// DIDWeb returns a KeyResolver that resolves a did:web sender's keys from
// its DID document (https://host/.well-known/did.json, or
// https://host/path/did.json for a did:web with a path). A kid is matched
// against the document's verification method ids, as a full DID URL or
// as a fragment. Each resolution fetches the document (no cache: keys
// rotate, and discovery is not on the message path).
func DIDWeb(options *ClientOptions) envelope.KeyResolver {
	var opts ClientOptions
	if options != nil {
		opts = *options
	}
	r := &didWebResolver{c: client(opts)}
	return envelope.KeyResolverFunc(r.resolve)
}

type didWebResolver struct {
	c *http.Client
}

func (r *didWebResolver) resolve(ctx context.Context, from, kid string) (*envelope.PublicKey, error) {
	host, path, err := didWebLocation(from)
	if err != nil {
		return nil, envelope.NewError(envelope.CodeUnauthenticated, "the sender is not a did:web", err)
	}
	u := "https://" + host + path + "/did.json"
	if path == "" {
		u = "https://" + host + didPath
	}
	b, err := fetch(ctx, r.c, u)
	if err != nil {
		return nil, err
	}
	var doc struct {
		ID                 string `json:"id"`
		VerificationMethod []struct {
			ID           string          `json:"id"`
			Controller   string          `json:"controller"`
			PublicKeyJwk json.RawMessage `json:"publicKeyJwk"`
		} `json:"verificationMethod"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, envelope.NewError(envelope.CodeUnauthenticated, "the DID document is not JSON", err)
	}
	if doc.ID != from {
		return nil, envelope.NewError(envelope.CodeUnauthenticated, fmt.Sprintf("the DID document at %s is %q's, not %q's", u, doc.ID, from), nil)
	}
	want := kid
	if strings.HasPrefix(kid, "#") {
		want = from + kid
	} else if !strings.Contains(kid, "#") {
		want = from + "#" + kid
	}
	for _, vm := range doc.VerificationMethod {
		id := vm.ID
		if strings.HasPrefix(id, "#") {
			id = from + id
		}
		if id != want && vm.ID != kid {
			continue
		}
		k, err := envelope.ParsePublicKey(vm.PublicKeyJwk)
		if err != nil {
			return nil, envelope.NewError(envelope.CodeUnauthenticated, "the DID document's key "+vm.ID+" is not usable", err)
		}
		// The key verifies under the kid the signature names.
		return envelope.NewPublicKey(k.Key(), kid)
	}
	return nil, fmt.Errorf("discovery: %s has no key %q: %w", from, kid, envelope.ErrKeyNotFound)
}

func client(opts ClientOptions) *http.Client {
	if opts.HTTPClient != nil {
		return opts.HTTPClient
	}
	return &http.Client{Timeout: 10 * time.Second}
}

// fetch GETs an https URL and returns its body, at most 256 << 10
// bytes. Failures to reach the server are 5.04 (retryable); a non-200
// answer or an oversized document is refused.
func fetch(ctx context.Context, c *http.Client, rawURL string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, envelope.NewError(envelope.CodeUnauthenticated, fmt.Sprintf("%q is not an https URL: discovery is never fetched in the clear", rawURL), err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, envelope.NewError(envelope.CodeBusy, "fetching "+rawURL+" failed", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, envelope.NewError(envelope.CodeUnauthenticated, fmt.Sprintf("%s answered %s", rawURL, resp.Status), nil)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentSize+1))
	if err != nil {
		return nil, envelope.NewError(envelope.CodeBusy, "reading "+rawURL+" failed", err)
	}
	if len(b) > maxDocumentSize {
		return nil, envelope.NewError(envelope.CodePayloadTooLarge, rawURL+" is larger than the discovery limit", nil)
	}
	return b, nil
}
