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
		// Allowed by default: receivers on localhost and in the VPC.
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

func TestCheckDialedAppliesAllowByNameOrAddress(t *testing.T) {
	t.Parallel()
	c, err := NewHTTPCaller(HTTPOptions{Allow: []string{"billing.internal", "10.0.0.0/8", "169.254.0.0/16"}})
	require.NoError(t, err)
	require.NoError(t, c.checkDialed(false, "10.2.3.4:443"))
	require.NoError(t, c.checkDialed(true, "192.168.1.1:443"), "the name matched an entry")
	err = c.checkDialed(false, "192.168.1.1:443")
	require.ErrorIs(t, err, ErrForbiddenDestination)
	require.EqualError(t, err, "forbidden destination: 192.168.1.1 is not in HTTPOptions.Allow")
	err = c.checkDialed(true, "169.254.169.254:80")
	require.ErrorIs(t, err, ErrForbiddenDestination, "forbidden even when allowed by name and by CIDR")
	require.EqualError(t, err, "forbidden destination: 169.254.169.254 is link-local (cloud metadata)")
	require.ErrorIs(t, c.checkDialed(true, "[fd00:ec2::254]:80"), ErrForbiddenDestination)

	open, err := NewHTTPCaller(HTTPOptions{})
	require.NoError(t, err)
	require.NoError(t, open.checkDialed(false, "127.0.0.1:8080"))
	require.NoError(t, open.checkDialed(false, "[fd12::1]:8080"))
	require.ErrorIs(t, open.checkDialed(false, "0.0.0.0:8080"), ErrForbiddenDestination)
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
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	for _, tc := range []struct {
		c         *HTTPCaller
		url       string
		want      string // "" for no error
		forbidden bool
	}{
		{open, "http://127.0.0.1:8080/hook", "", false},
		{open, "https://[::1]/hook", "", false},
		{open, "http://10.1.2.3/hook?x=1", "", false},
		{open, "http://localhost:9/hook", "", false},
		{open, "HTTPS://127.0.0.1/hook", "", false},
		{open, "ftp://127.0.0.1/file", `xtimer: callback URL "ftp://127.0.0.1/file": scheme "ftp" not allowed (want http or https)`, false},
		{open, "/hook", `xtimer: callback URL "/hook": not absolute (want http://host/... or https://host/...)`, false},
		{open, "127.0.0.1:8080/hook", `xtimer: callback URL "127.0.0.1:8080/hook": first path segment in URL cannot contain colon`, false},
		{open, "http:///hook", `xtimer: callback URL "http:///hook": no host`, false},
		{open, "http:hook", `xtimer: callback URL "http:hook": no host (want http://host/...)`, false},
		{open, "http://:8080/hook", `xtimer: callback URL "http://:8080/hook": no host`, false},
		{open, "http://127.0.0.1:0/hook", `xtimer: callback URL "http://127.0.0.1:0/hook": port "0" out of range`, false},
		{open, "http://user:pw@127.0.0.1/hook", `xtimer: callback URL "http://user:xxxxx@127.0.0.1/hook": user:password in the URL is not allowed (send credentials in a secret header)`, false},
		{open, "http://169.254.169.254/latest/meta-data/", `xtimer: callback URL "http://169.254.169.254/latest/meta-data/": forbidden destination: 169.254.169.254 is link-local (cloud metadata)`, true},
		{open, "http://169.254.10.1/", `xtimer: callback URL "http://169.254.10.1/": forbidden destination: 169.254.10.1 is link-local`, true},
		{open, "http://[fd00:ec2::254]/latest/", `xtimer: callback URL "http://[fd00:ec2::254]/latest/": forbidden destination: fd00:ec2::254 is a cloud metadata address`, true},
		{open, "http://[fe80::1%25eth0]/", `xtimer: callback URL "http://[fe80::1%25eth0]/": forbidden destination: fe80::1%eth0 is link-local`, true},
		{open, "http://0.0.0.0:8080/", `xtimer: callback URL "http://0.0.0.0:8080/": forbidden destination: 0.0.0.0 is unspecified`, true},
		{open, "http://[::]:8080/", `xtimer: callback URL "http://[::]:8080/": forbidden destination: :: is unspecified`, true},
		{named, "https://LocalHost/hook", "", false},
		{fenced, "http://127.0.0.1/hook", `xtimer: callback URL "http://127.0.0.1/hook": forbidden destination: 127.0.0.1 is not in HTTPOptions.Allow`, true},
		{fenced, "http://localhost/hook", `xtimer: callback URL "http://localhost/hook": forbidden destination: localhost is not in HTTPOptions.Allow`, true},
		{cidr, "http://10.0.0.7/hook", "", false},
		{cidr, "http://localhost/hook", `xtimer: callback URL "http://localhost/hook": localhost resolves to forbidden destination: `, true},
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
	c, err := NewHTTPCaller(HTTPOptions{})
	require.NoError(t, err)
	c.extraForbidden = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	err = c.CheckURL(t.Context(), "http://localhost:8080/")
	require.ErrorIs(t, err, ErrForbiddenDestination, "localhost resolves to a forbidden address")

	err = c.CheckURL(t.Context(), "http://no-such-host.invalid/")
	var dnsErr *net.DNSError
	require.ErrorAs(t, err, &dnsErr)
	require.Equal(t, "no-such-host.invalid", dnsErr.Name)
	require.NotErrorIs(t, err, ErrForbiddenDestination)
}
