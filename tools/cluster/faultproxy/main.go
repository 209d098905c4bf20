// Command faultproxy is a loopback-only HTTPS reverse proxy in front of the
// testenv kube-apiserver that injects the failures a client must survive:
// 429 with Retry-After (a text body, as API priority-and-fairness sends it),
// 503, any other status as a Kubernetes Status object, and connections
// closed without a response, either before the request is forwarded or after
// the apiserver has acted on it. It counts, per "METHOD /path", the requests
// it received, the ones it forwarded and the ones it faulted, so a test can
// prove that a POST reached the apiserver exactly once.
//
// It owns only the proxying and the faults: the upstream identity comes from
// a kubeconfig context (client certificate or token, CA), the client side is
// served with a self-signed certificate written to -ca-file. It must never
// listen on anything but a loopback address.
//
// Usage:
//
//	faultproxy -kubeconfig FILE [-context NAME] -port-file FILE -ca-file FILE
//	           [-listen 127.0.0.1:0] [-http1] [-seed N] [-max-lifetime 30m]
//	           [-fault SPEC]...
//
// A fault SPEC is comma-separated key=value pairs:
//
//	method=GET|POST|...|*   which requests it applies to (default *)
//	path=PREFIX             URL path prefix (default: any)
//	query=SUBSTRING         raw query must contain it (e.g. continue=)
//	action=ACTION           429 | 503 | reset | reset-after | slow-after | status (default 503)
//	code=NNN                the status for action=status (a Status object body)
//	retry-after=N           seconds in Retry-After for 429/503 (429 default 1)
//	skip=N                  let the first N matching requests through first
//	count=N                 fault at most N requests (0 = no limit)
//	rate=F                  fault a matching request with probability F (default 1)
//	every=N                 fault every Nth matching request only
//	delay=F                 seconds slow-after holds the answer back (default 1)
//
// "reset" reads the whole request, then closes the client connection (TCP
// RST) without forwarding it;
// "reset-after" forwards the request, waits for the apiserver's response,
// then closes the client connection without sending it; "slow-after"
// forwards it too and sends the apiserver's response only `delay` seconds
// later (a write that landed, whose answer is late). The first rule that
// matches and fires decides.
//
// Control endpoints on the same listener:
//
//	GET  /_faultproxy/counts  {"received":{...},"forwarded":{...},"faulted":{...}}
//	PUT  /_faultproxy/faults  body: a JSON array of SPEC strings; replaces the
//	                          rules and resets every counter
//	POST /_faultproxy/reset   resets the counters
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	mrand "math/rand"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"
)

type rule struct {
	spec       string
	method     string
	path       string
	query      string
	action     string
	code       int
	retryAfter int
	skip       int
	count      int
	rate       float64
	every      int
	delay      time.Duration

	matched int // matching requests seen
	fired   int // faults injected
}

func parseRule(spec string) (*rule, error) {
	r := &rule{spec: spec, method: "*", action: "503", rate: 1, retryAfter: -1, delay: time.Second}
	for _, kv := range strings.Split(spec, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("fault %q: %q is not key=value", spec, kv)
		}
		var err error
		switch k {
		case "method":
			r.method = strings.ToUpper(v)
		case "path":
			r.path = v
		case "query":
			r.query = v
		case "action":
			switch v {
			case "429", "503", "reset", "reset-after", "slow-after", "status":
				r.action = v
			default:
				return nil, fmt.Errorf("fault %q: unknown action %q", spec, v)
			}
		case "code":
			r.code, err = strconv.Atoi(v)
		case "retry-after":
			r.retryAfter, err = strconv.Atoi(v)
		case "skip":
			r.skip, err = strconv.Atoi(v)
		case "count":
			r.count, err = strconv.Atoi(v)
		case "rate":
			r.rate, err = strconv.ParseFloat(v, 64)
		case "every":
			r.every, err = strconv.Atoi(v)
		case "delay":
			var secs float64
			secs, err = strconv.ParseFloat(v, 64)
			r.delay = time.Duration(secs * float64(time.Second))
		default:
			return nil, fmt.Errorf("fault %q: unknown key %q", spec, k)
		}
		if err != nil {
			return nil, fmt.Errorf("fault %q: %s: %v", spec, k, err)
		}
	}
	if r.action == "status" && (r.code < 100 || r.code > 599) {
		return nil, fmt.Errorf("fault %q: action=status needs code=NNN", spec)
	}
	if r.action == "429" && r.retryAfter < 0 {
		r.retryAfter = 1
	}
	return r, nil
}

type proxy struct {
	mu        sync.Mutex
	rules     []*rule
	rnd       *mrand.Rand
	received  map[string]int
	forwarded map[string]int
	faulted   map[string]int

	upstream  *url.URL
	transport http.RoundTripper
	token     string
	rp        *httputil.ReverseProxy
}

func (p *proxy) resetCounts() {
	p.received = map[string]int{}
	p.forwarded = map[string]int{}
	p.faulted = map[string]int{}
}

// decide returns the rule that fires for this request, or nil.
func (p *proxy) decide(r *http.Request, key string) *rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.received[key]++
	for _, ru := range p.rules {
		if ru.method != "*" && ru.method != r.Method {
			continue
		}
		if ru.path != "" && !strings.HasPrefix(r.URL.Path, ru.path) {
			continue
		}
		if ru.query != "" && !strings.Contains(r.URL.RawQuery, ru.query) {
			continue
		}
		ru.matched++
		if ru.matched <= ru.skip {
			continue
		}
		if ru.count > 0 && ru.fired >= ru.count {
			continue
		}
		if ru.every > 0 && (ru.matched-ru.skip)%ru.every != 0 {
			continue
		}
		if ru.rate < 1 && p.rnd.Float64() >= ru.rate {
			continue
		}
		ru.fired++
		p.faulted[key]++
		return ru
	}
	return nil
}

type countingTransport struct {
	p    *proxy
	next http.RoundTripper
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.p.mu.Lock()
	t.p.forwarded[r.Method+" "+r.URL.Path]++
	t.p.mu.Unlock()
	return t.next.RoundTrip(r)
}

type connKey struct{}

// abort closes the client's TCP connection with a reset and ends the
// handler without a response.
func abort(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		raw := c
		if tc, ok := c.(*tls.Conn); ok {
			raw = tc.NetConn()
		}
		if tcp, ok := raw.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = raw.Close()
	}
	panic(http.ErrAbortHandler)
}

func statusBody(code int, reason, message string) []byte {
	b, _ := json.Marshal(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": message, "reason": reason, "code": code,
	})
	return b
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_faultproxy/") {
		p.control(w, r)
		return
	}
	key := r.Method + " " + r.URL.Path
	ru := p.decide(r, key)
	if ru == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	log.Printf("fault %s on %s (rule %q)", ru.action, key, ru.spec)
	switch ru.action {
	case "429":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Retry-After", strconv.Itoa(ru.retryAfter))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, "Too many requests, please try again later.\n")
	case "503":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ru.retryAfter >= 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ru.retryAfter))
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "service unavailable (injected by faultproxy)\n")
	case "status":
		w.Header().Set("Content-Type", "application/json")
		reason := strings.ReplaceAll(http.StatusText(ru.code), " ", "")
		if ru.code == http.StatusGone {
			reason = "Expired"
		}
		w.WriteHeader(ru.code)
		_, _ = w.Write(statusBody(ru.code, reason, "injected by faultproxy"))
	case "reset":
		// The request arrived whole (as far as the client can tell, the
		// server may have acted on it); then the connection dies.
		_, _ = io.Copy(io.Discard, r.Body)
		abort(r)
	case "reset-after":
		out := p.outgoing(r)
		resp, err := p.transport.RoundTrip(out)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		abort(r)
	case "slow-after":
		out := p.outgoing(r)
		resp, err := p.transport.RoundTrip(out)
		if err != nil {
			abort(r)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		select {
		case <-time.After(ru.delay):
		case <-r.Context().Done():
			return
		}
		for k, vs := range resp.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}
}

// outgoing is the upstream request for a reset-after fault (the reverse
// proxy builds its own for normal traffic).
func (p *proxy) outgoing(r *http.Request) *http.Request {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	u := *p.upstream
	u.Path = r.URL.Path
	u.RawPath = r.URL.RawPath
	u.RawQuery = r.URL.RawQuery
	out.URL = &u
	out.Host = u.Host
	p.setAuth(out.Header)
	return out
}

func (p *proxy) setAuth(h http.Header) {
	h.Del("Authorization")
	if p.token != "" {
		h.Set("Authorization", "Bearer "+p.token)
	}
}

func (p *proxy) control(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_faultproxy/counts" && r.Method == http.MethodGet:
		p.mu.Lock()
		b, _ := json.Marshal(map[string]map[string]int{
			"received": p.received, "forwarded": p.forwarded, "faulted": p.faulted,
		})
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case r.URL.Path == "/_faultproxy/faults" && r.Method == http.MethodPut:
		var specs []string
		if err := json.NewDecoder(r.Body).Decode(&specs); err != nil {
			http.Error(w, "body must be a JSON array of fault specs: "+err.Error(), http.StatusBadRequest)
			return
		}
		rules := make([]*rule, 0, len(specs))
		for _, s := range specs {
			ru, err := parseRule(s)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rules = append(rules, ru)
		}
		p.mu.Lock()
		p.rules = rules
		p.resetCounts()
		p.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/_faultproxy/reset" && r.Method == http.MethodPost:
		p.mu.Lock()
		p.resetCounts()
		p.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

// ---- kubeconfig (only what the testenv writes: cert/key/CA data or files, token)

type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server   string `json:"server"`
			CAData   string `json:"certificate-authority-data"`
			CAFile   string `json:"certificate-authority"`
			Insecure bool   `json:"insecure-skip-tls-verify"`
		} `json:"cluster"`
	} `json:"clusters"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			CertData string `json:"client-certificate-data"`
			CertFile string `json:"client-certificate"`
			KeyData  string `json:"client-key-data"`
			KeyFile  string `json:"client-key"`
			Token    string `json:"token"`
		} `json:"user"`
	} `json:"users"`
}

func pemFrom(data, file, base string) ([]byte, error) {
	if data != "" {
		return base64.StdEncoding.DecodeString(data)
	}
	if file == "" {
		return nil, nil
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(base, file)
	}
	return os.ReadFile(file)
}

func upstreamFrom(path, ctxName string) (*url.URL, *tls.Config, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, "", err
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(raw, &kc); err != nil {
		return nil, nil, "", fmt.Errorf("%s: %v", path, err)
	}
	if ctxName == "" {
		ctxName = kc.CurrentContext
	}
	var clusterName, userName string
	found := false
	for _, c := range kc.Contexts {
		if c.Name == ctxName {
			clusterName, userName, found = c.Context.Cluster, c.Context.User, true
		}
	}
	if !found {
		return nil, nil, "", fmt.Errorf("%s: no context %q", path, ctxName)
	}
	base := filepath.Dir(path)
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	var server string
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		server = c.Cluster.Server
		tc.InsecureSkipVerify = c.Cluster.Insecure
		ca, err := pemFrom(c.Cluster.CAData, c.Cluster.CAFile, base)
		if err != nil {
			return nil, nil, "", fmt.Errorf("cluster %s CA: %v", c.Name, err)
		}
		if ca != nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				return nil, nil, "", fmt.Errorf("cluster %s: no certificate in the CA", c.Name)
			}
			tc.RootCAs = pool
		}
	}
	if server == "" {
		return nil, nil, "", fmt.Errorf("%s: context %q has no cluster server", path, ctxName)
	}
	token := ""
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		token = u.User.Token
		cert, err := pemFrom(u.User.CertData, u.User.CertFile, base)
		if err != nil {
			return nil, nil, "", fmt.Errorf("user %s certificate: %v", u.Name, err)
		}
		key, err := pemFrom(u.User.KeyData, u.User.KeyFile, base)
		if err != nil {
			return nil, nil, "", fmt.Errorf("user %s key: %v", u.Name, err)
		}
		if cert != nil && key != nil {
			pair, err := tls.X509KeyPair(cert, key)
			if err != nil {
				return nil, nil, "", fmt.Errorf("user %s: %v", u.Name, err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, nil, "", err
	}
	return u, tc, token, nil
}

// selfSigned makes the proxy's serving certificate (its own CA, for
// 127.0.0.1 and localhost) and returns it with its PEM.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "faultproxy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	return pair, certPEM, err
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var faults multiFlag
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	kcPath := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the upstream apiserver")
	ctxName := flag.String("context", "", "kubeconfig context (default: current-context)")
	portFile := flag.String("port-file", "", "write the listening port here once ready")
	caFile := flag.String("ca-file", "", "write the proxy's self-signed certificate (PEM) here")
	http1 := flag.Bool("http1", false, "serve HTTP/1.1 only (no h2 in ALPN)")
	seed := flag.Int64("seed", 1, "seed for rate= faults")
	lifetime := flag.Duration("max-lifetime", 30*time.Minute, "exit after this long")
	flag.Var(&faults, "fault", "a fault rule (repeatable; see the source header)")
	flag.Parse()
	log.SetPrefix("faultproxy: ")
	log.SetFlags(log.Lmicroseconds)

	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		log.Fatalf("-listen %q: %v", *listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		log.Fatalf("-listen %q: only a loopback IP address is allowed", *listen)
	}
	if *kcPath == "" {
		log.Fatal("-kubeconfig (or KUBECONFIG) is required")
	}
	up, upTLS, token, err := upstreamFrom(*kcPath, *ctxName)
	if err != nil {
		log.Fatal(err)
	}

	p := &proxy{upstream: up, token: token, rnd: mrand.New(mrand.NewSource(*seed))}
	p.resetCounts()
	for _, s := range faults {
		ru, err := parseRule(s)
		if err != nil {
			log.Fatal(err)
		}
		p.rules = append(p.rules, ru)
	}
	base := &http.Transport{
		TLSClientConfig:     upTLS,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	p.transport = countingTransport{p: p, next: base}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.Out.Host = up.Host
			p.setAuth(pr.Out.Header)
		},
		Transport:     p.transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Printf("upstream %s %s: %v", r.Method, r.URL.Path, err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write(statusBody(http.StatusBadGateway, "InternalError", "faultproxy: upstream: "+err.Error()))
		},
	}

	cert, certPEM, err := selfSigned()
	if err != nil {
		log.Fatal(err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv := &http.Server{
		Handler:   p,
		TLSConfig: tc,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: log.New(io.Discard, "", 0), // aborted handlers are the point
	}
	if *http1 {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		tc.NextProtos = []string{"http/1.1"}
	} else {
		tc.NextProtos = []string{"h2", "http/1.1"}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if *caFile != "" {
		if err := writeAtomic(*caFile, certPEM); err != nil {
			log.Fatal(err)
		}
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if *portFile != "" {
		if err := writeAtomic(*portFile, []byte(strconv.Itoa(port)+"\n")); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("listening on https://%s -> %s (%d fault rules)", ln.Addr(), up, len(p.rules))
	time.AfterFunc(*lifetime, func() {
		log.Printf("max lifetime %s reached; exiting", *lifetime)
		os.Exit(0)
	})
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
