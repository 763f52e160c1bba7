package framework

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// pkiFiles are the files written by generatePKI, all inside one directory.
type pkiFiles struct {
	CACert      string // CA certificate (PEM); trusted by clients, --client-ca-file
	CAKey       string // CA private key (PEM); KCM's cluster signing key
	ServingCert string // kube-apiserver serving certificate, signed by the CA
	ServingKey  string
	SAKey       string // service-account signing key (RSA private key, PEM)
	SAPub       string // its public half (PKIX, PEM)

	caPEM []byte
}

// generatePKI creates a throw-away CA, an apiserver serving certificate for
// 127.0.0.1/localhost/the in-cluster service names, and a service-account
// key pair. Everything is done with the Go standard library (no openssl).
func generatePKI(dir string, serviceIP net.IP) (*pkiFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// RSA key generation dominates; do the three keys concurrently.
	keys := make([]*rsa.PrivateKey, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = rsa.GenerateKey(rand.Reader, 2048)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("generating RSA key: %w", err)
		}
	}
	caKey, servingKey, saKey := keys[0], keys[1], keys[2]

	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "corral-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	if serviceIP != nil {
		ips = append(ips, serviceIP)
	}
	servingTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: ips,
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTmpl, caCert, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}

	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}

	p := &pkiFiles{
		CACert:      filepath.Join(dir, "ca.crt"),
		CAKey:       filepath.Join(dir, "ca.key"),
		ServingCert: filepath.Join(dir, "apiserver.crt"),
		ServingKey:  filepath.Join(dir, "apiserver.key"),
		SAKey:       filepath.Join(dir, "sa.key"),
		SAPub:       filepath.Join(dir, "sa.pub"),
		caPEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
	files := []struct {
		path  string
		block *pem.Block
	}{
		{p.CACert, &pem.Block{Type: "CERTIFICATE", Bytes: caDER}},
		{p.CAKey, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(caKey)}},
		{p.ServingCert, &pem.Block{Type: "CERTIFICATE", Bytes: servingDER}},
		{p.ServingKey, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(servingKey)}},
		{p.SAKey, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}},
		{p.SAPub, &pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(f.block), 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// randomToken returns a random hex token for the static token file.
func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
