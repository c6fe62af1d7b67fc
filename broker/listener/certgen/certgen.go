package certgen

// This file owns the certificate authority and the leaves it issues.
//
// Invariant: a CA is never changed after NewCA or LoadCA returns it; Issue
// reads it only, so one CA may issue from several goroutines.
// Invariant: an issued leaf never outlives its CA (Issue refuses), is never
// itself a CA, and carries exactly the extended key usages asked for.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Usage says what an issued certificate may be used for (its extended key
// usage).
type Usage int

const (
	// Server certificates authenticate a listener to its clients.
	Server Usage = iota + 1
	// Client certificates authenticate a client to a listener (mutual TLS).
	Client
	// Both is for brokers: they listen, and dial the other brokers with the
	// same certificate.
	Both
)

func (u Usage) String() string {
	switch u {
	case Server:
		return "server"
	case Client:
		return "client"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Usage(%d)", int(u))
}

func (u Usage) extKeyUsage() ([]x509.ExtKeyUsage, error) {
	switch u {
	case Server:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, nil
	case Client:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	case Both:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, nil
	}
	return nil, fmt.Errorf("certgen: unknown usage %d", int(u))
}

// File names of a CA in its directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// clockSkew backdates NotBefore so a certificate issued on one machine is
// already valid on another whose clock is a little behind.
const clockSkew = 5 * time.Minute

// CA is a certificate authority: its certificate and private key.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// NewCA makes a self-signed certificate authority named commonName, valid
// from now (less a few minutes of clock skew) for validFor. It may sign
// leaves only, not further authorities.
func NewCA(commonName string, validFor time.Duration) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("certgen: new CA: empty common name")
	}
	if validFor <= 0 {
		return nil, fmt.Errorf("certgen: new CA %q: validity %v is not positive", commonName, validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certgen: new CA %q: generate key: %w", commonName, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("certgen: new CA %q: %w", commonName, err)
	}
	ski, err := subjectKeyID(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("certgen: new CA %q: %w", commonName, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		SubjectKeyId:          ski,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certgen: new CA %q: sign: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certgen: new CA %q: parse own certificate: %w", commonName, err)
	}
	return &CA{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

// Issue makes a key pair and a certificate for it signed by the CA, valid
// from now (less a few minutes of clock skew) for validFor, with commonName
// as the subject CN (the principal of a client certificate), dnsNames and
// ips as subject alternative names, and the extended key usage of usage.
// A Server or Both certificate needs at least one DNS name or IP address,
// since TLS clients check the host name against the SANs, not the CN. Both
// PEMs are returned; the key is PKCS #8.
func (ca *CA) Issue(commonName string, dnsNames []string, ips []net.IP, usage Usage, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	eku, err := usage.extKeyUsage()
	if err != nil {
		return nil, nil, err
	}
	if commonName == "" && len(dnsNames) == 0 && len(ips) == 0 {
		return nil, nil, errors.New("certgen: issue: no common name, DNS name or IP address")
	}
	if usage != Client && len(dnsNames) == 0 && len(ips) == 0 {
		return nil, nil, fmt.Errorf("certgen: issue %q: a %s certificate needs a DNS name or IP address", commonName, usage)
	}
	if validFor <= 0 {
		return nil, nil, fmt.Errorf("certgen: issue %q: validity %v is not positive", commonName, validFor)
	}
	now := time.Now()
	notAfter := now.Add(validFor)
	if notAfter.After(ca.cert.NotAfter) {
		return nil, nil, fmt.Errorf("certgen: issue %q: validity until %s ends after the CA's (%s)",
			commonName, notAfter.UTC().Format(time.RFC3339), ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certgen: issue %q: generate key: %w", commonName, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, fmt.Errorf("certgen: issue %q: %w", commonName, err)
	}
	ski, err := subjectKeyID(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certgen: issue %q: %w", commonName, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true,
		IsCA:                  false,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
		SubjectKeyId:          ski,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("certgen: issue %q: sign: %w", commonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("certgen: issue %q: encode key: %w", commonName, err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

// CertPEM is the CA's certificate in PEM: what clients and brokers trust
// (--tls-client-ca-file, kcat's ssl.ca.location).
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Certificate is the CA's parsed certificate. The caller must not change it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// KeyPEM is the CA's private key in PEM (PKCS #8).
func (ca *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("certgen: encode CA key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

// WriteFiles writes the CA into dir as ca.crt and ca.key (0600), creating
// dir (0700) if needed, so LoadCA can read it back.
func (ca *CA) WriteFiles(dir string) error {
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	return writePair(dir, CACertFile, CAKeyFile, ca.certPEM, keyPEM)
}

// LoadCA reads a CA written by (*CA).WriteFiles from dir. It checks that the
// certificate is a CA and that the key belongs to it.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("certgen: load CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("certgen: load CA: %w", err)
	}
	certDER, err := decodePEM(certPEM, "CERTIFICATE")
	if err != nil {
		return nil, fmt.Errorf("certgen: load CA %s: %w", CACertFile, err)
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, fmt.Errorf("certgen: load CA %s: %w", CACertFile, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("certgen: load CA %s: %q is not a certificate authority", CACertFile, cert.Subject.CommonName)
	}
	keyDER, err := decodePEM(keyPEM, "PRIVATE KEY")
	if err != nil {
		return nil, fmt.Errorf("certgen: load CA %s: %w", CAKeyFile, err)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("certgen: load CA %s: %w", CAKeyFile, err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("certgen: load CA %s: key is %T, want ECDSA", CAKeyFile, parsed)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("certgen: load CA: %s does not belong to %s", CAKeyFile, CACertFile)
	}
	return &CA{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", certDER)}, nil
}

// WriteFiles writes a leaf's certificate and key into dir as <name>.crt
// (0644) and <name>.key (0600), creating dir (0700) if needed. Each file is
// written to a temporary name and renamed over the old one, so a process
// that reloads the files sees either the old or the new file, never a part.
// The two renames are not one step: a reader may see the new certificate
// with the old key for a moment, which a reloader must treat as a failed
// reload and retry.
func WriteFiles(dir, name string, certPEM, keyPEM []byte) error {
	if name == "" || filepath.Base(name) != name {
		return fmt.Errorf("certgen: write files: name %q is not a plain file name", name)
	}
	return writePair(dir, name+".crt", name+".key", certPEM, keyPEM)
}

func writePair(dir, certName, keyName string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certgen: write files: %w", err)
	}
	// The key first: a reader that sees the new certificate then finds its
	// key already in place, unless it read the key before this rename.
	if err := writeAtomic(filepath.Join(dir, keyName), keyPEM, 0o600); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, certName), certPEM, 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("certgen: write %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		_ = f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("certgen: write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("certgen: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("certgen: write %s: %w", path, err)
	}
	return nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func decodePEM(data []byte, typ string) ([]byte, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if block.Type != typ {
		return nil, fmt.Errorf("PEM block is %q, want %q", block.Type, typ)
	}
	return block.Bytes, nil
}

// randomSerial draws a 128-bit serial number, as RFC 5280 §4.1.2.2 allows
// (at most 20 octets, positive) and CA/Browser rules ask (unpredictable).
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	serial, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("draw serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// subjectKeyID is the SHA-256 of the public key, cut to 20 bytes (RFC 7093
// method 1); the CA's becomes its leaves' authority key identifier.
func subjectKeyID(pub *ecdsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return sum[:20], nil
}
