// Package peerpb is the generated code of peer.proto, the gRPC peer service
// of package transport/grpcpeer.
package peerpb

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative peer.proto
