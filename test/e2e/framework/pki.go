// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files the control plane is started with. The serving
// certificate is our own, signed by a CA made here, so that every client
// (tests, evictd, the controller manager) verifies the server instead of
// skipping TLS verification.
type pki struct {
	caPEM          []byte
	caFile         string
	servingCert    string
	servingKey     string
	saSigningKey   string // RSA private key: signs service account tokens
	saVerifyingKey string // its public half: verifies them

	// The CA's own pair, kept to sign client certificates for kubelets.
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// ServiceIP is the ClusterIP of the "kubernetes" Service: the first address
// of --service-cluster-ip-range. Pods on a VM node reach the API server
// there through the node's relay, so the serving certificate names it.
var ServiceIP = net.IPv4(10, 0, 0, 1)

func writePKI(dir string) (*pki, error) {
	p := &pki{
		caFile:         filepath.Join(dir, "ca.crt"),
		servingCert:    filepath.Join(dir, "apiserver.crt"),
		servingKey:     filepath.Join(dir, "apiserver.key"),
		saSigningKey:   filepath.Join(dir, "sa.key"),
		saVerifyingKey: filepath.Join(dir, "sa.pub"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "evictd-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("self-sign test CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	p.caCert, p.caKey = caCert, caKey

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), ServiceIP},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign serving certificate: %w", err)
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, err
	}

	// Service account tokens are RS256 by default, so this key is RSA.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}

	files := []struct {
		path  string
		block pem.Block
	}{
		{p.caFile, pem.Block{Type: "CERTIFICATE", Bytes: caDER}},
		{p.servingCert, pem.Block{Type: "CERTIFICATE", Bytes: srvDER}},
		{p.servingKey, pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}},
		{p.saSigningKey, pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}},
		{p.saVerifyingKey, pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&f.block), 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// clientCertificate signs a client certificate for user in groups, for the
// API server's --client-ca-file authentication. It returns PEM cert and key.
func (p *pki) clientCertificate(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign client certificate for %s: %w", user, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
