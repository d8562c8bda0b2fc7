package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/internal/blocknode"
	"rackpool/internal/nbd"
	"rackpool/internal/pki"
)

// NBD over TLS for blocknodes and drive connect (docs/storage.md, "TLS"):
// the listener rule, the credentials directories, the nbds:// endpoints a
// TLS blocknode advertises, and `rackpool nbd-certs`, which fills a
// directory from the service's CA.

// loopbackOnly reports whether a TCP listen address (host:port) reaches
// this machine alone: a loopback IP address or "localhost". Every other
// host, a name included (it may resolve anywhere), and an empty or
// unspecified one (every interface) reach beyond it.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// blocknodeTLS checks blocknode's listen address against its TLS flag and
// returns the TLS configuration (nil for plain text) and the endpoint to
// advertise for addr.
func blocknodeTLS(dir, listen, advertise string) (*tls.Config, func(bound string) string, error) {
	if strings.Contains(advertise, "://") {
		return nil, nil, fmt.Errorf("--advertise %q: give HOST:PORT; the scheme follows --tls-certificates", advertise)
	}
	if dir == "" {
		if !loopbackOnly(listen) {
			return nil, nil, fmt.Errorf("--addr %s serves drives beyond this machine, where the capability tokens and the drives' data "+
				"would cross the network in clear text: add --tls-certificates DIR (server-cert.pem and server-key.pem, "+
				"which `rackpool nbd-certs` issues from the service's CA), or listen on a loopback address (127.0.0.1:PORT)", listen)
		}
		return nil, func(bound string) string { return bound }, nil
	}
	cfg, err := nbd.ServerTLSConfig(dir, false)
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-certificates %s: %w", dir, err)
	}
	return cfg, func(bound string) string { return client.NBDEndpointScheme + bound }, nil
}

// connectListenTLS checks drive connect's --listen against its TLS flag
// and returns the listener's TLS configuration (nil for plain text):
// clients must present a certificate of dir's CA, since nothing else
// authenticates them.
func connectListenTLS(dir, drive, network, address string) (*tls.Config, error) {
	if dir == "" {
		if network == "tcp" && !loopbackOnly(address) {
			return nil, fmt.Errorf("--listen tcp:%s would serve %s, writable, to every host that reaches this one, with no authentication "+
				"and no encryption: add --tls-certificates DIR (ca-cert.pem, server-cert.pem, server-key.pem; only clients with a "+
				"certificate of that CA get in; `rackpool nbd-certs` issues them), or listen on unix:PATH or tcp:127.0.0.1:PORT",
				address, drive)
		}
		return nil, nil
	}
	cfg, err := nbd.ServerTLSConfig(dir, true)
	if err != nil {
		return nil, fmt.Errorf("--tls-certificates %s: %w", dir, err)
	}
	return cfg, nil
}

// blocknodeDialer is how drive connect reaches blocknodes: plain text to
// an endpoint HOST:PORT, TLS to nbds://HOST:PORT, verifying the
// blocknode's certificate against the CAs the CLI trusts for the control
// plane (the system's and --ca-file, by default the service's own CA).
// Each connection's negotiation gets a second. Its errors show the export
// name with the token redacted, as the blocknode's logs do: they reach
// drive connect's log and terminal.
func blocknodeDialer(caFile string) (func(ctx context.Context, endpoint, export string) (*nbd.Client, error), error) {
	if caFile == "" {
		caFile = api.CAFile()
	}
	cfg, err := api.TLSConfig(caFile)
	if err != nil {
		return nil, err
	}
	secure := &nbd.Dialer{TLSConfig: cfg}
	return func(ctx context.Context, endpoint, export string) (*nbd.Client, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		var c *nbd.Client
		var err error
		if addr, ok := strings.CutPrefix(endpoint, client.NBDEndpointScheme); ok {
			c, err = secure.Dial(ctx, "tcp", addr, export)
		} else if strings.Contains(endpoint, "://") {
			return nil, fmt.Errorf("blocknode endpoint %q: want HOST:PORT or nbds://HOST:PORT", endpoint)
		} else {
			c, err = nbd.Dial(ctx, "tcp", endpoint, export)
		}
		if err != nil {
			return nil, redacted{err, export, blocknode.RedactExportName(export)}
		}
		return c, nil
	}, nil
}

// redacted is err with secret shown as shown in its text.
type redacted struct {
	err           error
	secret, shown string
}

func (r redacted) Error() string { return strings.ReplaceAll(r.err.Error(), r.secret, r.shown) }
func (r redacted) Unwrap() error { return r.err }

// NbdCertsCmd is `rackpool nbd-certs`: it issues NBD TLS credentials
// from the service's CA into a directory in the layout nbdkit, qemu and
// libnbd read.
func NbdCertsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nbd-certs --out DIR --server NAMES | --client NAME",
		Short: "issue NBD TLS certificates from the service's CA (for blocknode and drive connect --tls-certificates)",
		Long: "Writes ca-cert.pem and server or client certificates signed by the CA of rackpool serve's data\n" +
			"directory, in the layout nbdkit, qemu and libnbd read (docs/storage.md, \"TLS\").",
		Args: cli.NoArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "data", "the data directory of `rackpool serve` whose CA (DATA/tls) signs the certificates")
	out := fs.String("out", "", "directory to write ca-cert.pem and the certificates and keys to (required; created mode 0700)")
	server := fs.String("server", "", "issue server-cert.pem/server-key.pem for these comma-separated `NAMES` (host names and IP addresses clients dial)")
	client := fs.String("client", "", "issue client-cert.pem/client-key.pem with this common `NAME` (for clients of drive connect --tls-certificates)")
	cmd.RunE = func(*cobra.Command, []string) error {
		switch {
		case *out == "":
			return errors.New("--out DIR is required")
		case *server == "" && *client == "":
			return errors.New("nothing to issue: give --server NAMES, --client NAME or both")
		}
		caDir := filepath.Join(*data, "tls")
		now := time.Now()
		type file struct {
			name string
			data []byte
			mode os.FileMode
		}
		var files []file
		var caPEM []byte
		if *server != "" {
			leaf, err := pki.Issue(caDir, pki.LeafRequest{Names: strings.Split(*server, ",")}, now)
			if err != nil {
				return fmt.Errorf("--server: %w", err)
			}
			caPEM = leaf.CAPEM
			files = append(files, file{nbd.TLSServerKey, leaf.KeyPEM, 0o600}, file{nbd.TLSServerCert, leaf.CertPEM, 0o644})
		}
		if *client != "" {
			leaf, err := pki.Issue(caDir, pki.LeafRequest{Names: []string{*client}, Client: true}, now)
			if err != nil {
				return fmt.Errorf("--client: %w", err)
			}
			caPEM = leaf.CAPEM
			files = append(files, file{nbd.TLSClientKey, leaf.KeyPEM, 0o600}, file{nbd.TLSClientCert, leaf.CertPEM, 0o644})
		}
		files = append(files, file{nbd.TLSCACert, caPEM, 0o644})
		if err := os.MkdirAll(*out, 0o700); err != nil {
			return err
		}
		for _, f := range files {
			if err := pki.WriteFile(filepath.Join(*out, f.name), f.data, f.mode); err != nil {
				return err
			}
			fmt.Println(filepath.Join(*out, f.name))
		}
		return nil
	}
	return cmd
}
