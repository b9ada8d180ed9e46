package cli

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
	"github.com/synod-dev/synod/service"
)

// synod kv: get, set and delete keys on a running cluster over the Redis
// protocol (or the gRPC API with --grpc), through the Go client (with its
// fail-over). Output follows
// redis-cli: quoted values and "(integer) n" on a terminal, raw values
// otherwise; a missing key prints "(nil)" either way.

var kvFlags struct {
	addrs    string
	ns       string
	read     string
	password string
	timeout  time.Duration
	nx, xx   bool
	grpc     bool
}

func init() {
	kvCmd := &cobra.Command{
		Use:   "kv",
		Short: "Get, set and delete keys on a running cluster (Redis protocol)",
	}
	pf := kvCmd.PersistentFlags()
	pf.StringVar(&kvFlags.addrs, "addr", "127.0.0.1:6381", "comma-separated client addresses of nodes, tried in order")
	pf.StringVar(&kvFlags.ns, "ns", "", "namespace (default: the node's default namespace)")
	pf.StringVar(&kvFlags.read, "read", "linearizable", "read consistency: linearizable (default), log, quorum, lease, regular or local (what each means depends on the protocol)")
	pf.StringVar(&kvFlags.password, "password", "", "password (default: $SYNOD_PASSWORD)")
	pf.DurationVar(&kvFlags.timeout, "timeout", 10*time.Second, "timeout per attempt at one node")
	pf.BoolVar(&kvFlags.grpc, "grpc", false, "use the gRPC API (--addr then lists the nodes' grpc addresses)")

	getCmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's value",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kvFlags.grpc {
				return kvRunGRPC(service.Op{Kind: "get", Key: args[0]})
			}
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
			if kvFlags.grpc {
				op := service.Op{Kind: "set", Key: args[0], Args: [][]byte{[]byte(args[1])}}
				if len(cmdArgs) == 4 {
					op.Args = append(op.Args, []byte(strings.ToLower(cmdArgs[3])))
				}
				return kvRunGRPC(op)
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
			if kvFlags.grpc {
				ops := make([]service.Op, len(args))
				for i, k := range args {
					ops[i] = service.Op{Kind: "del", Key: k}
				}
				return kvRunGRPC(ops...)
			}
			return kvRun(func(ctx context.Context, c *client.Client) (resp.Reply, error) {
				return c.Do(ctx, append([]string{"DEL"}, args...)...)
			})
		},
	}
	kvCmd.AddCommand(getCmd, setCmd, delCmd)
	rootCmd.AddCommand(kvCmd)
}

func kvOptions() ([]string, client.Options, error) {
	mode, err := automaton.ParseReadMode(kvFlags.read)
	if err != nil {
		return nil, client.Options{}, err
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
	return addrs, client.Options{Namespace: kvFlags.ns, ReadMode: mode, Password: pw, Timeout: kvFlags.timeout, PoolSize: 1}, nil
}

// kvRunGRPC runs ops over the gRPC API and prints the result (for several
// ops, all integers, their sum: DEL of several keys).
func kvRunGRPC(ops ...service.Op) error {
	addrs, opts, err := kvOptions()
	if err != nil {
		return err
	}
	c, err := client.NewGRPC(addrs, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	var rep resp.Reply
	var sum int64
	for _, op := range ops {
		r, _, err := c.DoOp(context.Background(), "", op, client.OpOptions{})
		if err != nil {
			return err
		}
		switch r.Type {
		case service.ResultNil:
			rep = resp.Reply{Kind: resp.Null}
		case service.ResultOK:
			rep = resp.Reply{Kind: resp.SimpleString, Str: []byte("OK")}
		case service.ResultBytes:
			rep = resp.Reply{Kind: resp.Bulk, Str: r.Bytes}
		case service.ResultInt:
			sum += r.Int
			rep = resp.Reply{Kind: resp.Integer, Int: sum}
		case service.ResultErr:
			return errors.New(r.Err)
		case service.ResultArray:
			rep = kvArrayReply(r)
		}
	}
	fmt.Println(kvFormat(rep, kvIsTerminal()))
	return nil
}

func kvRun(f func(context.Context, *client.Client) (resp.Reply, error)) error {
	addrs, opts, err := kvOptions()
	if err != nil {
		return err
	}
	c, err := client.New(addrs, opts)
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

// kvArrayReply renders an array result (SYNOD OP of a hash, list or set
// operation) as a RESP array reply.
func kvArrayReply(r service.Result) resp.Reply {
	rep := resp.Reply{Kind: resp.Array}
	for _, e := range r.Elems {
		var x resp.Reply
		switch e.Type {
		case service.ResultNil:
			x = resp.Reply{Kind: resp.Null}
		case service.ResultOK:
			x = resp.Reply{Kind: resp.SimpleString, Str: []byte("OK")}
		case service.ResultBytes:
			x = resp.Reply{Kind: resp.Bulk, Str: e.Bytes}
		case service.ResultInt:
			x = resp.Reply{Kind: resp.Integer, Int: e.Int}
		case service.ResultErr:
			x = resp.Reply{Kind: resp.Error, Str: []byte(e.Err)}
		case service.ResultArray:
			x = kvArrayReply(e)
		}
		rep.Elems = append(rep.Elems, x)
	}
	return rep
}
