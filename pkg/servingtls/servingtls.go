// SPDX-License-Identifier: Apache-2.0

// Package servingtls gives evictd's secure port its certificate: the
// operator's files, or, as Kubernetes components do when given none, a
// self-signed one made in memory at start. A bearer token sent to an
// endpoint in clear text could be replayed against the API server by
// anyone on the path, so the endpoints that take tokens are served over TLS
// only.
package servingtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Config returns the TLS configuration of the secure port: the
// certificate in certFile and keyFile when given (both or neither), else a
// self-signed one for host (the node name) valid for a year.
func Config(certFile, keyFile, host string, now time.Time) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	switch {
	case (certFile == "") != (keyFile == ""):
		return nil, errors.New("a serving certificate needs both its certificate and its key file, or neither")
	case certFile != "":
		cert, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("serving certificate %q, key %q: %w", certFile, keyFile, err)
		}
	default:
		cert, err = SelfSigned(host, now)
		if err != nil {
			return nil, err
		}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// SelfSigned makes an ECDSA P-256 certificate for host, localhost and the
// loopback addresses (a port-forward arrives on them). P-256: an RSA key
// takes seconds to make on a slow node.
func SelfSigned(host string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	names := []string{"localhost"}
	if host != "" && host != "localhost" {
		names = append([]string{host}, names...)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("evictd@%s", names[0])},
		NotBefore:             now.Add(-time.Hour), // the node's clock may lag the caller's
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              names,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
