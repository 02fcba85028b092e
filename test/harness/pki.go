package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// pki holds the file paths of every certificate and key the control plane uses.
// One CA signs serving and client certificates; a second one signs the
// front-proxy client certificate, as kube-apiserver's aggregation layer expects.
type pki struct {
	CACert, CAKey                 string
	FrontProxyCACert              string
	FrontProxyCert, FrontProxyKey string
	ServingCert, ServingKey       string
	AdminCert, AdminKey           string
	ServiceAccountKey             string
	ServiceAccountPub             string
	caPEM                         []byte
}

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// servingNames are the DNS names the shared serving certificate answers to:
// the aggregation layer dials the APIService's Service by its in-cluster name.
var servingNames = []string{
	"localhost",
	"kubernetes", "kubernetes.default", "kubernetes.default.svc",
	"karmada-aggregated-apiserver.karmada-system.svc",
	"karmada-webhook.karmada-system.svc",
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{}
	ca, err := newCA("kubectl-rebalance-harness-ca")
	if err != nil {
		return nil, err
	}
	frontCA, err := newCA("kubectl-rebalance-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	serving, err := issue(ca, pkix.Name{CommonName: "harness-serving"}, servingNames,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.96.0.1")}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	admin, err := issue(ca, pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	front, err := issue(frontCA, pkix.Name{CommonName: "front-proxy-client"}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}

	write := func(name string, data []byte) (string, error) {
		path := filepath.Join(dir, name)
		return path, os.WriteFile(path, data, 0o600)
	}
	files := []struct {
		target *string
		name   string
		data   []byte
	}{
		{&p.CACert, "ca.crt", certPEM(ca.cert)},
		{&p.CAKey, "ca.key", keyPEM(ca.key)},
		{&p.FrontProxyCACert, "front-proxy-ca.crt", certPEM(frontCA.cert)},
		{&p.FrontProxyCert, "front-proxy-client.crt", certPEM(front.cert)},
		{&p.FrontProxyKey, "front-proxy-client.key", keyPEM(front.key)},
		{&p.ServingCert, "tls.crt", certPEM(serving.cert)},
		{&p.ServingKey, "tls.key", keyPEM(serving.key)},
		{&p.AdminCert, "admin.crt", certPEM(admin.cert)},
		{&p.AdminKey, "admin.key", keyPEM(admin.key)},
		{&p.ServiceAccountKey, "sa.key", keyPEM(saKey)},
		{&p.ServiceAccountPub, "sa.pub", publicKeyPEM(&saKey.PublicKey)},
	}
	for _, f := range files {
		path, err := write(f.name, f.data)
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", f.name, err)
		}
		*f.target = path
	}
	p.caPEM = certPEM(ca.cert)
	return p, nil
}

func newCA(name string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return &keyPair{cert: cert, key: key}, err
}

func issue(ca *keyPair, subject pkix.Name, dns []string, ips []net.IP, usage x509.ExtKeyUsage) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return &keyPair{cert: cert, key: key}, err
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(k *ecdsa.PrivateKey) []byte {
	der, _ := x509.MarshalECPrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func publicKeyPEM(k *ecdsa.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}
