package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"strings"
)

// minTLSVersion is the oldest TLS version the server accepts: TLS 1.0 and
// 1.1 are deprecated (RFC 8996).
const minTLSVersion = tls.VersionTLS12

// tlsConfig returns the HTTPS configuration of -tls-cert and -tls-key, or
// nil when neither is set. The pair is read once, here: a certificate is
// rotated by restarting the server. Every error names the flag and the
// file at fault.
func (c config) tlsConfig() (*tls.Config, error) {
	if c.TLSCert == "" && c.TLSKey == "" {
		return nil, nil
	}
	certPEM, err := os.ReadFile(c.TLSCert)
	if err != nil {
		return nil, usagef("-tls-cert %q: %w", c.TLSCert, err)
	}
	keyPEM, err := os.ReadFile(c.TLSKey)
	if err != nil {
		return nil, usagef("-tls-key %q: %w", c.TLSKey, err)
	}
	if err = checkCertPEM(certPEM); err != nil {
		return nil, usagef("-tls-cert %q: %w", c.TLSCert, err)
	}
	if !hasPEMBlock(keyPEM, func(typ string) bool { return strings.HasSuffix(typ, "PRIVATE KEY") }) {
		return nil, usagef("-tls-key %q: no PEM PRIVATE KEY block: want the certificate's private key in PEM", c.TLSKey)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The certificate parsed above, so the key is what is wrong: unreadable
		// or not the certificate's.
		return nil, usagef("-tls-key %q does not fit -tls-cert %q: %w", c.TLSKey, c.TLSCert, err)
	}
	return &tls.Config{MinVersion: minTLSVersion, Certificates: []tls.Certificate{pair}}, nil
}

// checkCertPEM reports what keeps certPEM from being a certificate chain:
// no CERTIFICATE block, or one that does not parse.
func checkCertPEM(certPEM []byte) error {
	n := 0
	for rest := certPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		n++
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", n, err)
		}
	}
	if n == 0 {
		return fmt.Errorf("no PEM CERTIFICATE block: want a PEM certificate, optionally followed by its intermediates")
	}
	return nil
}

// hasPEMBlock reports whether data holds a PEM block whose type is.
func hasPEMBlock(data []byte, is func(typ string) bool) bool {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return false
		}
		if is(block.Type) {
			return true
		}
	}
}

// cleartextOffLoopback reports whether the server would speak cleartext
// HTTP to other machines: no TLS, no -insecure-listen, and a listener
// bound to an address that is not loopback. It looks at the address
// actually bound, so a host name counts by what it resolved to.
func (c config) cleartextOffLoopback(bound net.Addr) bool {
	if c.TLSCert != "" || c.InsecureListen {
		return false
	}
	tcp, ok := bound.(*net.TCPAddr)
	return !ok || !tcp.IP.IsLoopback()
}
