package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"time"
)

// DefaultCAFile is where a client looks for the service's CA when it is
// not told: the CA that `rackpool serve` creates in its default data
// directory, relative to the working directory.
const DefaultCAFile = "data/tls/ca.pem"

// CAFile is the CA file a client trusts by default: $RACKPOOL_CA_FILE,
// else DefaultCAFile unless it does not exist (one that exists but cannot
// be read is named, so the reason is reported), else "" (the system's
// roots only).
func CAFile() string {
	if f := os.Getenv("RACKPOOL_CA_FILE"); f != "" {
		return f
	}
	if _, err := os.Stat(DefaultCAFile); !errors.Is(err, fs.ErrNotExist) {
		return DefaultCAFile
	}
	return ""
}

// TLSConfig trusts the system's roots plus the PEM certificates in caFile
// ("" for the system's roots only), TLS 1.2 and later.
func TLSConfig(caFile string) (*tls.Config, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile != "" {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// HTTPClient is an HTTP client that trusts caFile besides the system's
// roots (see TLSConfig).
func HTTPClient(caFile string) (*http.Client, error) {
	cfg, err := TLSConfig(caFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr, Timeout: 5 * time.Minute}, nil
}

// failing is the transport of a client whose CA file could not be read:
// every request reports why.
type failing struct{ err error }

func (f failing) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }
