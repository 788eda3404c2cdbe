package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestForbiddenReasonRefusesMetadataLinkLocalAndUnspecified(t *testing.T) {
	t.Parallel()
	for ip, want := range map[string]string{
		"169.254.169.254":        "is link-local (cloud metadata)",
		"::ffff:169.254.169.254": "is link-local (cloud metadata)",
		"169.254.1.2":            "is link-local",
		"fe80::1":                "is link-local",
		"fe80::1%eth0":           "is link-local",
		"fd00:ec2::254":          "is a cloud metadata address",
		"100.100.100.200":        "is a cloud metadata address",
		"0.0.0.0":                "is unspecified",
		"::":                     "is unspecified",
		"0.1.2.3":                "is in 0.0.0.0/8 (this network)",
		"224.0.0.1":              "is multicast",
		"64:ff9b::a9fe:a9fe":     "is link-local (cloud metadata) (NAT64 of 169.254.169.254)",
		// Issue 25's audit: Azure's WireServer, and the IPv4-compatible
		// IPv6 forms of the metadata addresses.
		"168.63.129.16":        "is a cloud metadata address",
		"::a9fe:a9fe":          "is link-local (cloud metadata) (IPv4-compatible form of 169.254.169.254)",
		"::169.254.169.254":    "is link-local (cloud metadata) (IPv4-compatible form of 169.254.169.254)",
		"::6464:64c8":          "is a cloud metadata address (IPv4-compatible form of 100.100.100.200)",
		"::ffff:168.63.129.16": "is a cloud metadata address",
		// Not forbidden: receivers in the VPC, and loopback, which is
		// refused unless allowed (loopbackReason).
		"127.0.0.1":      "",
		"::1":            "",
		"10.1.2.3":       "",
		"192.168.0.1":    "",
		"fd00::1":        "",
		"100.64.0.1":     "",
		"93.184.216.34":  "",
		"64:ff9b::a01:1": "",
		"::a01:1":        "",
	} {
		require.Equal(t, want, forbiddenReason(netip.MustParseAddr(ip)), ip)
	}
}

func TestLoopbackReasonCoversEveryFormOfLoopback(t *testing.T) {
	t.Parallel()
	for ip, want := range map[string]string{
		"127.0.0.1":              "is loopback",
		"127.255.0.9":            "is loopback",
		"::1":                    "is loopback",
		"::ffff:127.0.0.1":       "is loopback",
		"::127.0.0.1":            "is loopback (IPv4-compatible form of 127.0.0.1)",
		"::7f01:203":             "is loopback (IPv4-compatible form of 127.1.2.3)",
		"64:ff9b::7f00:1":        "is loopback (NAT64 of 127.0.0.1)",
		"::1%lo":                 "is loopback",
		"128.0.0.1":              "",
		"10.0.0.1":               "",
		"::2":                    "",
		"64:ff9b::a01:1":         "",
		"::ffff:10.0.0.1":        "",
		"fd00::1":                "",
		"2001:db8::7f00:1":       "",
		"::ffff:0:7f00:1":        "", // SIIT, not a form Go or the kernel routes to loopback
		"0.0.0.0":                "", // forbidden apart, always
		"::ffff:169.254.169.254": "",
	} {
		require.Equal(t, want, loopbackReason(netip.MustParseAddr(ip)), ip)
	}
}

func TestCheckDialedAppliesAllowByNameOrAddress(t *testing.T) {
	t.Parallel()
	c, err := NewHTTPCaller(HTTPOptions{Allow: []string{"billing.internal", "*.example.com", "10.0.0.0/8", "169.254.0.0/16"}})
	require.NoError(t, err)
	require.NoError(t, c.checkDialed("", "10.2.3.4:443"))
	require.NoError(t, c.checkDialed("billing.internal", "192.168.1.1:443"), "the name matched an entry")
	err = c.checkDialed("", "192.168.1.1:443")
	require.ErrorIs(t, err, ErrForbiddenDestination)
	require.EqualError(t, err, "forbidden destination: 192.168.1.1 is not in HTTPOptions.Allow")
	err = c.checkDialed("billing.internal", "169.254.169.254:80")
	require.ErrorIs(t, err, ErrForbiddenDestination, "forbidden even when allowed by name and by CIDR")
	require.EqualError(t, err, "forbidden destination: 169.254.169.254 is link-local (cloud metadata)")
	require.ErrorIs(t, c.checkDialed("billing.internal", "[fd00:ec2::254]:80"), ErrForbiddenDestination)
	// A name entry never vouches for loopback: a rebinding name under an
	// allowed domain that resolves to 127.0.0.1 is refused after DNS.
	for _, name := range []string{"billing.internal", "rebind.example.com", ""} {
		err = c.checkDialed(name, "127.0.0.1:6379")
		require.ErrorIs(t, err, ErrForbiddenDestination, name)
		require.EqualError(t, err, "forbidden destination: 127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it (127.0.0.1, ::1, localhost or a CIDR holding it)")
		require.ErrorIs(t, c.checkDialed(name, "[::1]:6379"), ErrForbiddenDestination, name)
		require.ErrorIs(t, c.checkDialed(name, "[::ffff:127.0.0.1]:6379"), ErrForbiddenDestination, name)
	}

	open, err := NewHTTPCaller(HTTPOptions{})
	require.NoError(t, err)
	require.NoError(t, open.checkDialed("", "[fd12::1]:8080"))
	require.NoError(t, open.checkDialed("receiver.example", "93.184.216.34:443"))
	require.ErrorIs(t, open.checkDialed("", "0.0.0.0:8080"), ErrForbiddenDestination)
	require.ErrorIs(t, open.checkDialed("", "127.0.0.1:8080"), ErrForbiddenDestination)
	require.ErrorIs(t, open.checkDialed("localhost", "127.0.0.1:8080"), ErrForbiddenDestination)
	require.ErrorIs(t, open.checkDialed("evil.example", "[::1]:8080"), ErrForbiddenDestination)

	for allow, dialed := range map[string][2]string{
		"127.0.0.1":        {"", "127.0.0.1:8080"},
		"::1":              {"", "[::1]:8080"},
		"127.0.0.0/8":      {"any.name", "127.0.0.2:8080"},
		"::ffff:127.0.0.1": {"", "[::ffff:127.0.0.1]:8080"},
		"localhost":        {"localhost", "127.0.0.1:8080"},
		"*.localhost":      {"app.localhost", "[::1]:8080"},
	} {
		c, newErr := NewHTTPCaller(HTTPOptions{Allow: []string{allow}})
		require.NoError(t, newErr)
		require.NoError(t, c.checkDialed(dialed[0], dialed[1]), allow)
	}
	named, err := NewHTTPCaller(HTTPOptions{Allow: []string{"localhost"}})
	require.NoError(t, err)
	require.ErrorIs(t, named.checkDialed("", "127.0.0.1:8080"), ErrForbiddenDestination, "a name entry does not allow the literal")
}

func TestNewHTTPCallerNamesTheBadAllowEntry(t *testing.T) {
	t.Parallel()
	for entry, want := range map[string]string{
		"":                 `xtimer: HTTPOptions.Allow entry "": empty`,
		"10.0.0.0/33":      `xtimer: HTTPOptions.Allow entry "10.0.0.0/33": not a CIDR`,
		"http://x.example": `xtimer: HTTPOptions.Allow entry "http://x.example": not a CIDR`,
		"x.example:443":    `xtimer: HTTPOptions.Allow entry "x.example:443": character ':' not allowed in a host name`,
		"a..example":       `xtimer: HTTPOptions.Allow entry "a..example": bad label ""`,
		"*":                `xtimer: HTTPOptions.Allow entry "*": character '*' not allowed`,
		"*.*.example.com":  `xtimer: HTTPOptions.Allow entry "*.*.example.com": character '*' not allowed`,
		"a.*.example.com":  `xtimer: HTTPOptions.Allow entry "a.*.example.com": character '*' not allowed`,
		"169.254.169.254":  `xtimer: HTTPOptions.Allow entry "169.254.169.254": is link-local (cloud metadata) and is never called`,
		"fe80::1%eth0":     `xtimer: HTTPOptions.Allow entry "fe80::1%eth0": an IP has no zone`,
	} {
		_, err := NewHTTPCaller(HTTPOptions{Allow: []string{"ok.example", entry}})
		require.Error(t, err, entry)
		require.Contains(t, err.Error(), want)
		var allowErr *AllowError
		require.ErrorAs(t, err, &allowErr, entry)
		require.Equal(t, 1, allowErr.Index, entry)
		require.Equal(t, entry, allowErr.Entry)
		require.NotEmpty(t, allowErr.Reason, entry)
	}
	_, err := NewHTTPCaller(HTTPOptions{MaxResponse: -1})
	require.EqualError(t, err, "xtimer: HTTPOptions.MaxResponse -1: negative")

	c, err := NewHTTPCaller(HTTPOptions{Allow: []string{"Billing.Internal.", "*.Example.com", "10.0.0.1", "fd00::/8", "::ffff:10.9.9.9"}})
	require.NoError(t, err)
	require.True(t, c.allow.matchesName("billing.internal"))
	require.True(t, c.allow.matchesName("BILLING.internal."))
	require.True(t, c.allow.matchesName("a.example.com"))
	require.True(t, c.allow.matchesName("a.b.example.com"))
	require.False(t, c.allow.matchesName("example.com"), "*.example.com does not match example.com")
	require.False(t, c.allow.matchesName("badexample.com"))
	require.False(t, c.allow.matchesName("billing.internal.evil.com"))
	require.True(t, c.allow.matchesIP(netip.MustParseAddr("10.0.0.1")))
	require.False(t, c.allow.matchesIP(netip.MustParseAddr("10.0.0.2")))
	require.True(t, c.allow.matchesIP(netip.MustParseAddr("fd00::5")))
	require.True(t, c.allow.matchesIP(netip.MustParseAddr("::ffff:10.0.0.1")))
	require.True(t, c.allow.matchesIP(netip.MustParseAddr("10.9.9.9")))
}

func TestCheckURLSaysWhyAURLIsRefused(t *testing.T) {
	t.Parallel()
	open, err := NewHTTPCaller(HTTPOptions{})
	require.NoError(t, err)
	fenced, err := NewHTTPCaller(HTTPOptions{Allow: []string{"billing.internal", "*.example.com"}})
	require.NoError(t, err)
	named, err := NewHTTPCaller(HTTPOptions{Allow: []string{"localhost"}})
	require.NoError(t, err)
	cidr, err := NewHTTPCaller(HTTPOptions{Allow: []string{"10.0.0.0/8"}})
	require.NoError(t, err)
	loop, err := NewHTTPCaller(HTTPOptions{Allow: []string{"127.0.0.1", "::1"}})
	require.NoError(t, err)
	v6loop, err := NewHTTPCaller(HTTPOptions{Allow: []string{"::1"}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	for _, tc := range []struct {
		c         *HTTPCaller
		url       string
		want      string // "" for no error
		forbidden bool
	}{
		{open, "http://10.1.2.3/hook?x=1", "", false},
		{open, "HTTPS://10.1.2.3/hook", "", false},
		{loop, "http://127.0.0.1:8080/hook", "", false},
		{loop, "https://[::1]/hook", "", false},
		{loop, "http://localhost:9/hook", "", false},
		{loop, "http://10.1.2.3/hook", `xtimer: callback URL "http://10.1.2.3/hook": forbidden destination: 10.1.2.3 is not in HTTPOptions.Allow`, true},
		// Issue 25, hole 5: the console itself and the host's Redis.
		{open, "http://127.0.0.1:8080/xtimer/api/tasks", `xtimer: callback URL "http://127.0.0.1:8080/xtimer/api/tasks": forbidden destination: 127.0.0.1 is loopback, refused unless HTTPOptions.Allow lists it (127.0.0.1, ::1, localhost or a CIDR holding it)`, true},
		{open, "http://localhost:6379/", `xtimer: callback URL "http://localhost:6379/": forbidden destination: localhost is a loopback name, refused unless HTTPOptions.Allow lists it (127.0.0.1, ::1, localhost or a CIDR holding it)`, true},
		{open, "https://[::1]/hook", `xtimer: callback URL "https://[::1]/hook": forbidden destination: ::1 is loopback, refused unless`, true},
		{open, "http://[::ffff:127.0.0.1]/hook", `forbidden destination: 127.0.0.1 is loopback, refused unless`, true},
		{open, "http://[::127.0.0.1]/hook", `forbidden destination: ::7f00:1 is loopback (IPv4-compatible form of 127.0.0.1), refused unless`, true},
		{open, "http://[64:ff9b::7f00:1]/hook", `forbidden destination: 64:ff9b::7f00:1 is loopback (NAT64 of 127.0.0.1), refused unless`, true},
		{open, "http://db.localhost/hook", `forbidden destination: db.localhost is a loopback name, refused unless`, true},
		{open, "http://168.63.129.16/machine?comp=goalstate", `forbidden destination: 168.63.129.16 is a cloud metadata address`, true},
		{open, "http://[::a9fe:a9fe]/latest/", `forbidden destination: ::a9fe:a9fe is link-local (cloud metadata) (IPv4-compatible form of 169.254.169.254)`, true},
		{open, "http://[64:ff9b::a83f:8110]/", `forbidden destination: 64:ff9b::a83f:8110 is a cloud metadata address (NAT64 of 168.63.129.16)`, true},
		{open, "http://[::6464:64c8]/", `forbidden destination: ::6464:64c8 is a cloud metadata address (IPv4-compatible form of 100.100.100.200)`, true},
		{open, "ftp://10.1.2.3/file", `xtimer: callback URL "ftp://10.1.2.3/file": scheme "ftp" not allowed (want http or https)`, false},
		{open, "/hook", `xtimer: callback URL "/hook": not absolute (want http://host/... or https://host/...)`, false},
		{open, "10.1.2.3:8080/hook", `xtimer: callback URL "10.1.2.3:8080/hook": first path segment in URL cannot contain colon`, false},
		{open, "http:///hook", `xtimer: callback URL "http:///hook": no host`, false},
		{open, "http:hook", `xtimer: callback URL "http:hook": no host (want http://host/...)`, false},
		{open, "http://:8080/hook", `xtimer: callback URL "http://:8080/hook": no host`, false},
		{open, "http://10.1.2.3:0/hook", `xtimer: callback URL "http://10.1.2.3:0/hook": port "0" out of range`, false},
		{open, "http://user:pw@10.1.2.3/hook", `xtimer: callback URL "http://user:xxxxx@10.1.2.3/hook": user:password in the URL is not allowed (send credentials in a secret header)`, false},
		{open, "http://169.254.169.254/latest/meta-data/", `xtimer: callback URL "http://169.254.169.254/latest/meta-data/": forbidden destination: 169.254.169.254 is link-local (cloud metadata)`, true},
		{open, "http://169.254.10.1/", `xtimer: callback URL "http://169.254.10.1/": forbidden destination: 169.254.10.1 is link-local`, true},
		{open, "http://[fd00:ec2::254]/latest/", `xtimer: callback URL "http://[fd00:ec2::254]/latest/": forbidden destination: fd00:ec2::254 is a cloud metadata address`, true},
		{open, "http://[fe80::1%25eth0]/", `xtimer: callback URL "http://[fe80::1%25eth0]/": forbidden destination: fe80::1%eth0 is link-local`, true},
		{open, "http://0.0.0.0:8080/", `xtimer: callback URL "http://0.0.0.0:8080/": forbidden destination: 0.0.0.0 is unspecified`, true},
		{open, "http://[::]:8080/", `xtimer: callback URL "http://[::]:8080/": forbidden destination: :: is unspecified`, true},
		{named, "https://LocalHost/hook", "", false},
		{fenced, "http://10.1.2.3/hook", `xtimer: callback URL "http://10.1.2.3/hook": forbidden destination: 10.1.2.3 is not in HTTPOptions.Allow`, true},
		{fenced, "http://other.internal/hook", `xtimer: callback URL "http://other.internal/hook": forbidden destination: other.internal is not in HTTPOptions.Allow`, true},
		{fenced, "http://127.0.0.1/hook", `xtimer: callback URL "http://127.0.0.1/hook": forbidden destination: 127.0.0.1 is loopback, refused unless`, true},
		{fenced, "http://localhost/hook", `xtimer: callback URL "http://localhost/hook": forbidden destination: localhost is a loopback name, refused unless`, true},
		{cidr, "http://10.0.0.7/hook", "", false},
		{cidr, "http://localhost/hook", `xtimer: callback URL "http://localhost/hook": forbidden destination: localhost is a loopback name, refused unless`, true},
		{v6loop, "http://localhost/hook", `xtimer: callback URL "http://localhost/hook": localhost resolves to forbidden destination: 127.0.0.1 is loopback, refused unless`, true},
		{cidr, "http://192.168.0.1/hook", `xtimer: callback URL "http://192.168.0.1/hook": forbidden destination: 192.168.0.1 is not in HTTPOptions.Allow`, true},
	} {
		err := tc.c.CheckURL(ctx, tc.url)
		if tc.want == "" {
			require.NoError(t, err, tc.url)
			continue
		}
		require.Error(t, err, tc.url)
		require.Contains(t, err.Error(), tc.want, tc.url)
		require.Equal(t, tc.forbidden, errors.Is(err, ErrForbiddenDestination), tc.url)
		var urlErr *URLError
		require.ErrorAs(t, err, &urlErr, tc.url)
		require.Equal(t, redactURL(tc.url), urlErr.URL)
		require.Equal(t, err.Error(), fmt.Sprintf("xtimer: callback URL %q: %s", urlErr.URL, urlErr.Reason), "the message is the URL and the reason")
	}
}

func TestCheckURLResolvesNamesWithinTheContext(t *testing.T) {
	t.Parallel()
	c, err := NewHTTPCaller(HTTPOptions{Allow: []string{"127.0.0.0/8"}})
	require.NoError(t, err)
	require.NoError(t, c.CheckURL(t.Context(), "http://localhost:8080/"), "localhost resolves to 127.0.0.1, which is allowed")

	err = c.CheckURL(t.Context(), "http://no-such-host.invalid/")
	var dnsErr *net.DNSError
	require.ErrorAs(t, err, &dnsErr)
	require.Equal(t, "no-such-host.invalid", dnsErr.Name)
	require.NotErrorIs(t, err, ErrForbiddenDestination)
}
