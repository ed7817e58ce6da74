package ollama

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// normalizeHost turns an OLLAMA_HOST value into a base URL the way Ollama's
// own client reads it: no scheme means http with port 11434; an explicit
// http or https scheme without a port means 80 or 443; ":port" and an
// empty host mean 127.0.0.1; a bare "ollama.com" means https://ollama.com.
// Unlike the server, a client cannot dial an unspecified bind address, so
// 0.0.0.0 and :: become loopback. An empty value, or one that does not
// parse, returns "".
func normalizeHost(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	defaultPort := "11434"
	scheme, hostport, ok := strings.Cut(s, "://")
	switch {
	case !ok:
		scheme, hostport = "http", s
		if s == "ollama.com" {
			scheme, hostport = "https", "ollama.com:443"
		}
	case scheme == "http":
		defaultPort = "80"
	case scheme == "https":
		defaultPort = "443"
	default:
		return ""
	}
	hostport, path, _ := strings.Cut(hostport, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.Trim(hostport, "[]"), defaultPort
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		port = defaultPort
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}
	if path = strings.Trim(path, "/"); path != "" {
		u.Path = "/" + path
	}
	if _, err := url.Parse(u.String()); err != nil {
		return ""
	}
	return u.String()
}
