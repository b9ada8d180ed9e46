package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
)

func init() {
	var (
		cfgPath, out, clusterName string
		nodes, clients            []string
	)
	certsCmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a cluster CA, node and client certificates and the cluster secret",
		Long: `Writes into --out (created if missing): the cluster CA (ca.crt, ca.key; an
existing CA there is reused), one certificate per node (node-<id>.crt/.key,
naming the node id as synod://<cluster>/node/<id> and valid as a TLS server for
the hosts of the node's addresses and localhost), one per --client
(client-<name>.crt/.key), and the cluster secret (secret.txt, kept if present).
Keys are ECDSA P-256. Nodes and cluster name come from --config, or from
--cluster and --nodes. Then set in the cluster file:

  secret: <contents of secret.txt>
  tls: {dir: <out>, clients: required}

See docs/SECURITY.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := certs.Spec{Cluster: clusterName, Clients: clients}
			if cfgPath != "" {
				cfg, err := config.Load(cfgPath)
				if err != nil {
					return err
				}
				spec.Cluster = cfg.Cluster
				spec.Nodes = cluster.CertNodes(cfg)
			}
			for _, n := range nodes {
				spec.Nodes = append(spec.Nodes, certs.Node{ID: n})
			}
			if spec.Cluster == "" || len(spec.Nodes) == 0 {
				return errors.New("certs: give --config, or --cluster and --nodes")
			}
			wrote, err := certs.Generate(out, spec)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s into %s\n", strings.Join(wrote, " "), out)
			return nil
		},
	}
	f := certsCmd.Flags()
	f.StringVar(&cfgPath, "config", "", "cluster file: certificates for its nodes and addresses")
	f.StringVar(&out, "out", "./synod-certs", "directory to write to")
	f.StringVar(&clusterName, "cluster", "", "cluster name (without --config)")
	f.StringSliceVar(&nodes, "nodes", nil, "node ids (without --config, or in addition)")
	f.StringSliceVar(&clients, "client", nil, "client certificate names")

	hashCmd := &cobra.Command{
		Use:   "hash-password",
		Short: "Read a password from stdin and print its hash for the cluster file's users[].password",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			pw := strings.TrimRight(line, "\r\n")
			if pw == "" {
				return errors.New("certs hash-password: empty password on stdin")
			}
			h, err := certs.HashPassword(pw)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), h)
			return nil
		},
	}
	certsCmd.AddCommand(hashCmd)
	rootCmd.AddCommand(certsCmd)
}

// upCluster is `synod cluster up`; with --tls, cluster.Up generates
// certificates and the secret into <dir>/tls before the nodes start (peers
// use mutual TLS, the client ports TLS only: tls.clients "required") and
// checks readiness over TLS.
func upCluster(up cluster.UpOptions, withTLS bool) (*cluster.Cluster, error) {
	up.TLS = withTLS
	return cluster.Up(up)
}

// tlsHint is how to reach node client address addr of c over TLS.
func tlsHint(c *cluster.Cluster, addr string) string {
	if c.Config.TLS == nil {
		return ""
	}
	_, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("tls: redis-cli --tls --cacert %s -p %s", filepath.Join(c.Config.TLS.Dir, certs.CAFile), port)
}
