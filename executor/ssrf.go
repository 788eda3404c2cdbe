package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrForbiddenDestination is wrapped by every error that refuses a callback
// destination: an address that is never called (unspecified, link-local,
// cloud metadata), a loopback address or localhost name that
// HTTPOptions.Allow does not list, or one outside HTTPOptions.Allow.
var ErrForbiddenDestination = errors.New("xtimer: forbidden destination")

// forbiddenError says which address was refused and why. It is what the
// dialer's Control hook returns, so it reaches Do's caller through
// *url.Error and *net.OpError; errors.Is(err, ErrForbiddenDestination) holds.
type forbiddenError struct {
	addr   string // an IP, or a host name refused by the name allowlist
	reason string // "is link-local (cloud metadata)"
}

func (e *forbiddenError) Error() string {
	return "forbidden destination: " + e.addr + " " + e.reason
}

func (e *forbiddenError) Is(target error) bool { return target == ErrForbiddenDestination }

// Addresses that are never called, whatever Allow says. Private ranges are
// not here: receivers in the VPC are the point of HTTP callbacks; an
// operator who wants to fence them sets Allow. Loopback is apart
// (loopbackReason): refused unless Allow lists it.
var (
	awsMetadata     = netip.MustParseAddr("169.254.169.254") // AWS, GCP, Azure, OCI, DigitalOcean…
	awsMetadataV6   = netip.MustParseAddr("fd00:ec2::254")   // AWS IMDS over IPv6 (inside fd00::/8, which is otherwise private)
	alibabaMetadata = netip.MustParseAddr("100.100.100.200") // Alibaba Cloud (inside 100.64.0.0/10, CGNAT)
	azureWireServer = netip.MustParseAddr("168.63.129.16")   // Azure's WireServer: VM agent, health probes, DNS
	v4Compatible    = netip.MustParsePrefix("::/96")         // deprecated IPv4-compatible IPv6: ::a9fe:a9fe is 169.254.169.254
	thisNetwork     = netip.MustParsePrefix("0.0.0.0/8")
	nat64           = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64 prefix: 64:ff9b::a9fe:a9fe is 169.254.169.254
)

// forbiddenReason says why ip is never called, or "" when it may be.
func forbiddenReason(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	switch {
	case !ip.IsValid():
		return "is not an IP address"
	case ip.IsUnspecified():
		return "is unspecified"
	case thisNetwork.Contains(ip):
		return "is in 0.0.0.0/8 (this network)"
	case ip == awsMetadata:
		return "is link-local (cloud metadata)"
	case ip == awsMetadataV6, ip == alibabaMetadata, ip == azureWireServer:
		return "is a cloud metadata address"
	case ip.IsLinkLocalUnicast():
		return "is link-local"
	case ip.IsMulticast():
		return "is multicast"
	case nat64.Contains(ip):
		if v4 := last4(ip); forbiddenReason(v4) != "" {
			return forbiddenReason(v4) + " (NAT64 of " + v4.String() + ")"
		}
	case v4Compatible.Contains(ip) && !ip.IsLoopback():
		if v4 := last4(ip); forbiddenReason(v4) != "" {
			return forbiddenReason(v4) + " (IPv4-compatible form of " + v4.String() + ")"
		}
	}
	return ""
}

// loopbackReason says why ip is a loopback address (127.0.0.0/8, ::1, and
// the IPv4-mapped, IPv4-compatible and NAT64 forms of 127.0.0.0/8), or ""
// when it is not. A callback to loopback reaches the services of the
// scheduler's own host: the console, Redis, the database. It is refused
// unless Allow lists it (issue 25, hole 5).
func loopbackReason(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	switch {
	case ip.IsLoopback():
		return "is loopback"
	case nat64.Contains(ip) && last4(ip).IsLoopback():
		return "is loopback (NAT64 of " + last4(ip).String() + ")"
	case v4Compatible.Contains(ip) && last4(ip).IsLoopback():
		return "is loopback (IPv4-compatible form of " + last4(ip).String() + ")"
	}
	return ""
}

// loopbackHint ends the error of a loopback destination that Allow does not
// list: it says how to allow one.
const loopbackHint = ", refused unless HTTPOptions.Allow lists it (127.0.0.1, ::1, localhost or a CIDR holding it)"

// isLocalhostName reports whether host is "localhost" or a name under
// .localhost, which resolve to loopback (RFC 6761, section 6.3).
func isLocalhostName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// last4 is the IPv4 address in the last four bytes of an IPv6 address.
func last4(ip netip.Addr) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[12:]))
}

// allowlist is HTTPOptions.Allow, parsed. A destination passes when its host
// name matches a name entry or the IP dialed matches an IP/CIDR entry; an
// empty allowlist passes everything (forbidden addresses are refused apart).
type allowlist struct {
	names    map[string]bool // "billing.internal"
	suffixes []string        // ".example.com" for "*.example.com"
	prefixes []netip.Prefix  // IPs as /32 or /128
}

// AllowError is NewHTTPCaller's error for an entry of HTTPOptions.Allow it
// cannot use; its fields say which entry and why, for callers that name
// the option differently (xtimer.New names it Options.HTTPAllow).
type AllowError struct {
	// Index is the entry's position in HTTPOptions.Allow.
	Index int
	// Entry is the entry as given.
	Entry string
	// Reason says what is wrong with it: "an IP has no zone".
	Reason string

	err error // the cause, when a parser gave one
}

// Error reads like `xtimer: HTTPOptions.Allow entry "10.0.0.0/33": not a
// CIDR (want e.g. 10.0.0.0/8): …`.
func (e *AllowError) Error() string {
	return fmt.Sprintf("xtimer: HTTPOptions.Allow entry %q: %s", e.Entry, e.Reason)
}

// Unwrap returns the parser's error behind Reason, if any.
func (e *AllowError) Unwrap() error { return e.err }

func parseAllow(entries []string) (allowlist, error) {
	var a allowlist
	for i, raw := range entries {
		bad := func(reason string, cause error) error {
			return &AllowError{Index: i, Entry: raw, Reason: reason, err: cause}
		}
		e := strings.ToLower(strings.TrimSpace(raw))
		if e == "" {
			return allowlist{}, bad("empty", nil)
		}
		if strings.Contains(e, "/") {
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return allowlist{}, bad("not a CIDR (want e.g. 10.0.0.0/8): "+err.Error(), err)
			}
			if p.Addr().Zone() != "" {
				return allowlist{}, bad("a CIDR has no zone", nil)
			}
			a.prefixes = append(a.prefixes, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(e); err == nil {
			if ip.Zone() != "" {
				return allowlist{}, bad("an IP has no zone", nil)
			}
			if r := forbiddenReason(ip); r != "" {
				return allowlist{}, bad(r+" and is never called", nil)
			}
			ip = ip.Unmap()
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		e = strings.TrimSuffix(e, ".")
		if rest, ok := strings.CutPrefix(e, "*."); ok {
			if r := hostNameProblem(rest); r != "" {
				return allowlist{}, bad(r, nil)
			}
			a.suffixes = append(a.suffixes, "."+rest)
			continue
		}
		if r := hostNameProblem(e); r != "" {
			return allowlist{}, bad(r, nil)
		}
		if a.names == nil {
			a.names = map[string]bool{}
		}
		a.names[e] = true
	}
	return a, nil
}

// hostNameProblem accepts DNS names (letters, digits, '-', '_' in labels of
// 1 to 63 bytes); a wildcard is only allowed as a whole leading label. It
// says what is wrong with h, or "" when nothing is.
func hostNameProblem(h string) string {
	if h == "" {
		return "empty host name"
	}
	if len(h) > 253 {
		return "host name longer than 253 bytes"
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Sprintf("bad label %q (want a host name, *.domain, an IP or a CIDR)", label)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Sprintf("character %q not allowed in a host name (want a host name, *.domain, an IP or a CIDR)", r)
			}
		}
	}
	return ""
}

func (a allowlist) empty() bool {
	return len(a.names) == 0 && len(a.suffixes) == 0 && len(a.prefixes) == 0
}

// matchesName reports whether host (a name from a URL) matches a name entry.
func (a allowlist) matchesName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a.names[host] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(host, s) && len(host) > len(s) {
			return true
		}
	}
	return false
}

func (a allowlist) matchesIP(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// holdsLoopback reports whether an IP/CIDR entry holds a loopback address,
// so that a localhost name may be resolved and its addresses checked.
func (a allowlist) holdsLoopback() bool {
	for _, p := range a.prefixes {
		if p.Contains(netip.AddrFrom4([4]byte{127, 0, 0, 1})) || p.Contains(netip.IPv6Loopback()) {
			return true
		}
	}
	return false
}

// checkAddr decides on one address about to be called. name is the URL's
// host when it is a name ("" for an IP literal). Forbidden addresses always
// fail. A loopback address passes only when an IP/CIDR entry holds it, or
// when name is a localhost name that a name entry lists; a name entry such
// as "*.example.com" never vouches for loopback, whatever its DNS says.
// Other addresses pass without an allowlist, or when name matches a name
// entry, or when an IP/CIDR entry holds them.
func (c *HTTPCaller) checkAddr(name string, ip netip.Addr) error {
	ip = ip.Unmap() // errors name 127.0.0.1, not ::ffff:127.0.0.1
	if r := forbiddenReason(ip); r != "" {
		return &forbiddenError{addr: ip.String(), reason: r}
	}
	byName := name != "" && c.allow.matchesName(name)
	if r := loopbackReason(ip); r != "" {
		if c.allow.matchesIP(ip) || byName && isLocalhostName(name) {
			return nil
		}
		return &forbiddenError{addr: ip.String(), reason: r + loopbackHint}
	}
	if !byName && !c.allow.empty() && !c.allow.matchesIP(ip) {
		return &forbiddenError{addr: ip.String(), reason: "is not in HTTPOptions.Allow"}
	}
	return nil
}

// checkHost decides what it can on a URL's host before any DNS: an IP
// literal fully (checkAddr); a localhost name is refused unless Allow lists
// it by name or holds a loopback address; any other name is refused when
// Allow has only name entries and none matches. A name that passes is
// decided again on each address it resolves to.
func (c *HTTPCaller) checkHost(host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return c.checkAddr("", ip)
	}
	if isLocalhostName(host) {
		if c.allow.matchesName(host) || c.allow.holdsLoopback() {
			return nil
		}
		return &forbiddenError{addr: host, reason: "is a loopback name" + loopbackHint}
	}
	if !c.allow.empty() && len(c.allow.prefixes) == 0 && !c.allow.matchesName(host) {
		return &forbiddenError{addr: host, reason: "is not in HTTPOptions.Allow"}
	}
	return nil
}

// checkDialed is the dialer's Control hook: address is the IP:port about to
// be connected, after DNS resolution, for the first request and for every
// redirect alike; name is the host name dialed ("" for an IP literal). This
// is the check that counts; the others only fail earlier with a clearer
// message.
func (c *HTTPCaller) checkDialed(name, address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &forbiddenError{addr: address, reason: "is not an IP:port"}
	}
	return c.checkAddr(name, ap.Addr())
}

// CheckURL validates a callback URL when a task is created or changed: it is
// absolute, http or https, has a host and no user:password (put credentials
// in a secret header, which reads mask), and every address its host resolves
// to (under ctx's deadline) may be called. Every error is a *URLError.
// Errors about the destination wrap ErrForbiddenDestination and say why
// ("169.254.169.254 is link-local (cloud metadata)"); a name that does not
// resolve gives an error wrapping the *net.DNSError. Passing CheckURL does not make later calls safe on its own:
// DNS may change, so Do checks every address it dials again.
func (c *HTTPCaller) CheckURL(ctx context.Context, rawURL string) error {
	fail := func(reason string, cause error) error {
		return &URLError{URL: redactURL(rawURL), Reason: reason, err: cause}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		err = unwrapURLError(err)
		return fail(err.Error(), err)
	}
	if !u.IsAbs() {
		return fail("not absolute (want http://host/... or https://host/...)", nil)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fail(fmt.Sprintf("scheme %q not allowed (want http or https)", u.Scheme), nil)
	}
	if u.Opaque != "" {
		return fail(fmt.Sprintf("no host (want %s://host/...)", u.Scheme), nil)
	}
	if u.User != nil {
		return fail("user:password in the URL is not allowed (send credentials in a secret header)", nil)
	}
	host := u.Hostname()
	if host == "" {
		return fail("no host", nil)
	}
	if p := u.Port(); p != "" {
		if n, convErr := strconv.Atoi(p); convErr != nil || n < 1 || n > 65535 {
			return fail(fmt.Sprintf("port %q out of range", p), nil)
		}
	}
	if err = c.checkHost(host); err != nil {
		return fail(err.Error(), err)
	}
	if _, parseErr := netip.ParseAddr(host); parseErr == nil {
		return nil
	}
	addrs, err := c.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fail(fmt.Sprintf("resolving %s: %v", host, err), err)
	}
	for _, ip := range addrs {
		if err := c.checkAddr(host, ip); err != nil {
			return fail(fmt.Sprintf("%s resolves to %v", host, err), err)
		}
	}
	return nil
}

// URLError is CheckURL's error: the URL refused and why. Errors about the
// destination unwrap to one that matches ErrForbiddenDestination.
type URLError struct {
	// URL is the URL checked, its password masked.
	URL string
	// Reason says why it is refused, as in `no host` or `forbidden
	// destination: 169.254.169.254 is link-local (cloud metadata)`.
	Reason string

	err error // the cause, when there is one
}

// Error reads like `xtimer: callback URL "ftp://host/": scheme "ftp" not
// allowed (want http or https)`.
func (e *URLError) Error() string {
	return fmt.Sprintf("xtimer: callback URL %q: %s", e.URL, e.Reason)
}

// Unwrap returns the cause behind Reason, if any: a *net.DNSError, an
// error matching ErrForbiddenDestination, a URL parser's error.
func (e *URLError) Unwrap() error { return e.err }

// dialContext is the transport's only way out. addr is the URL's host:port
// (there is no proxy), so the name allowlist is checked here, and the Control
// hook checks each IP actually dialed.
func (c *HTTPCaller) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	name := host
	if _, err := netip.ParseAddr(host); err == nil {
		name = ""
	}
	d := net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			return c.checkDialed(name, address)
		},
	}
	return d.DialContext(ctx, network, addr)
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL hides a password in a URL that is put in an error.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}
