package seed002pb

import (
	"github.com/synod-dev/synod/cluster"
)

// setTransport selects the namespace's peer transport in a cluster's
// options ("-" and "tcp": the default framed TCP stream).
func setTransport(opts *cluster.UpOptions, tr string) error {
	switch tr {
	case "-", "tcp", "":
		return nil
	}
	return errTransport(tr)
}

type errTransport string

func (e errTransport) Error() string {
	return "transport " + string(e) + " cannot be selected in this binary yet"
}
