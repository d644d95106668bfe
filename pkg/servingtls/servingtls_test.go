// SPDX-License-Identifier: Apache-2.0

package servingtls

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSelfSignedNamesTheNodeAndLoopback(t *testing.T) {
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	cfg, err := Config("", "", "node-a", now)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-a", "localhost", "127.0.0.1", "::1"} {
		if err := c.VerifyHostname(name); err != nil {
			t.Errorf("certificate not valid for %s: %v", name, err)
		}
	}
	if c.NotBefore.After(now) || c.NotAfter.Before(now.Add(364*24*time.Hour)) {
		t.Errorf("valid %v to %v, want from before now for a year", c.NotBefore, c.NotAfter)
	}
}

func TestFilesBothOrNeither(t *testing.T) {
	dir := t.TempDir()
	if _, err := Config(filepath.Join(dir, "tls.crt"), "", "n", time.Now()); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("certificate without key: %v, want an error asking for both", err)
	}
	if _, err := Config(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), "n", time.Now()); err == nil ||
		!strings.Contains(err.Error(), "tls.crt") {
		t.Errorf("missing files: %v, want an error naming them", err)
	}
}

func TestFilesAreServed(t *testing.T) {
	cert, err := SelfSigned("node-b", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Config(crt, key, "ignored", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if c.VerifyHostname("node-b") != nil {
		t.Errorf("served certificate is not the file's (names %v)", c.DNSNames)
	}
}
