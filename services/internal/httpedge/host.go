package httpedge

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/axsched/ax/contracts"
)

// loopbackHosts are the names a local client uses for a loopback server.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// DefaultHosts is the Host allow-list of a server bound to bindAddr: the
// loopback names and the bound host. A server bound to every interface
// ("0.0.0.0:8080", ":8080") answers any Host, since the names it is reached
// by (a load balancer's, a pod's IP) cannot be guessed; give AllowedHosts
// there to close DNS rebinding.
func DefaultHosts(bindAddr string) []string {
	host, _, err := net.SplitHostPort(bindAddr)
	if err != nil {
		host = bindAddr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return []string{"*"}
	}
	hosts := slices.Clone(loopbackHosts)
	if h := strings.ToLower(host); !slices.Contains(hosts, h) {
		hosts = append(hosts, h)
	}
	return hosts
}

// allowHosts refuses requests whose Host names no allowed host. A page
// served by an attacker's domain that rebinds to 127.0.0.1 still sends its
// own domain as Host, so this keeps a loopback server out of its reach.
func allowHosts(hosts []string, next http.Handler) http.Handler {
	if slices.Contains(hosts, "*") {
		return next
	}
	allowed := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		allowed[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed[hostName(r.Host)] {
			WriteProblem(w, contracts.NewProblem(http.StatusMisdirectedRequest, contracts.CodeMisdirectedRequest,
				fmt.Sprintf("this server does not answer for host %q: see --allowed-hosts", r.Host)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostName is the lower-case host of a Host header, without port or the
// brackets of an IPv6 literal.
func hostName(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}
