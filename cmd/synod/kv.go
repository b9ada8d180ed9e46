package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/resp"
)

// synod kv: get, set and delete keys on a running cluster over the Redis
// protocol, through the Go client (with its fail-over). Output follows
// redis-cli: quoted values and "(integer) n" on a terminal, raw values
// otherwise; a missing key prints "(nil)" either way.

var kvFlags struct {
	addrs    string
	ns       string
	read     string
	password string
	timeout  time.Duration
	nx, xx   bool
}

func init() {
	kvCmd := &cobra.Command{
		Use:   "kv",
		Short: "Get, set and delete keys on a running cluster (Redis protocol)",
	}
	pf := kvCmd.PersistentFlags()
	pf.StringVar(&kvFlags.addrs, "addr", "127.0.0.1:6381", "comma-separated client addresses of nodes, tried in order")
	pf.StringVar(&kvFlags.ns, "ns", "", "namespace (default: the node's default namespace)")
	pf.StringVar(&kvFlags.read, "read", "linearizable", "read consistency: linearizable, regular or local")
	pf.StringVar(&kvFlags.password, "password", "", "password (default: $SYNOD_PASSWORD)")
	pf.DurationVar(&kvFlags.timeout, "timeout", 10*time.Second, "timeout per attempt at one node")

	getCmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's value",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return kvRun(func(ctx context.Context, c *client.Client) (resp.Reply, error) {
				return c.Do(ctx, "GET", args[0])
			})
		},
	}
	setCmd := &cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Set a key (with --nx only if absent, with --xx only if present)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kvFlags.nx && kvFlags.xx {
				return errors.New("--nx and --xx exclude each other")
			}
			cmdArgs := []string{"SET", args[0], args[1]}
			if kvFlags.nx {
				cmdArgs = append(cmdArgs, "NX")
			} else if kvFlags.xx {
				cmdArgs = append(cmdArgs, "XX")
			}
			return kvRun(func(ctx context.Context, c *client.Client) (resp.Reply, error) {
				return c.Do(ctx, cmdArgs...)
			})
		},
	}
	setCmd.Flags().BoolVar(&kvFlags.nx, "nx", false, "set only if the key does not exist")
	setCmd.Flags().BoolVar(&kvFlags.xx, "xx", false, "set only if the key exists")
	delCmd := &cobra.Command{
		Use:   "del KEY...",
		Short: "Delete keys and print how many existed",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return kvRun(func(ctx context.Context, c *client.Client) (resp.Reply, error) {
				return c.Do(ctx, append([]string{"DEL"}, args...)...)
			})
		},
	}
	kvCmd.AddCommand(getCmd, setCmd, delCmd)
	rootCmd.AddCommand(kvCmd)
}

func kvRun(f func(context.Context, *client.Client) (resp.Reply, error)) error {
	mode, err := automaton.ParseReadMode(kvFlags.read)
	if err != nil {
		return err
	}
	var addrs []string
	for _, a := range strings.Split(kvFlags.addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	pw := kvFlags.password
	if pw == "" {
		pw = os.Getenv("SYNOD_PASSWORD")
	}
	c, err := client.New(addrs, client.Options{Namespace: kvFlags.ns, ReadMode: mode, Password: pw, Timeout: kvFlags.timeout, PoolSize: 1})
	if err != nil {
		return err
	}
	defer c.Close()
	rep, err := f(context.Background(), c)
	if err != nil {
		return err
	}
	fmt.Println(kvFormat(rep, kvIsTerminal()))
	return nil
}

func kvIsTerminal() bool {
	fi, err := os.Stdout.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// kvFormat renders a reply like redis-cli: on a terminal, quoted strings and
// "(integer) n"; otherwise raw. Nulls are "(nil)" in both.
func kvFormat(r resp.Reply, tty bool) string {
	switch r.Kind {
	case resp.Null:
		return "(nil)"
	case resp.SimpleString:
		return string(r.Str)
	case resp.Integer:
		if tty {
			return fmt.Sprintf("(integer) %d", r.Int)
		}
		return fmt.Sprint(r.Int)
	case resp.Bulk, resp.Verbatim:
		if tty {
			return kvRepr(r.Str)
		}
		return string(r.Str)
	}
	return r.String()
}

// kvRepr quotes like redis-cli (sdscatrepr): \n \r \t \a \b \\ \" escapes,
// other non-printable bytes as \xHH.
func kvRepr(b []byte) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range b {
		switch c {
		case '\\', '"':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\a':
			sb.WriteString(`\a`)
		case '\b':
			sb.WriteString(`\b`)
		default:
			if c >= 0x20 && c < 0x7f {
				sb.WriteByte(c)
			} else {
				fmt.Fprintf(&sb, `\x%02x`, c)
			}
		}
	}
	sb.WriteByte('"')
	return sb.String()
}
