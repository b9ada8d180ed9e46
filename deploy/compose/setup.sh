#!/bin/sh
# Prepares deploy/compose for `docker compose up`: builds the image, runs
# `synod certs` in it to make the CA, node and client certificates and the
# secret in ./tls, writes nodes/cluster.yaml (cluster.yaml with the secret), gives each node its
# own certificate and key in nodes/<id>/tls and a data directory in
# nodes/<id>/data, and writes .env with the ids the nodes run as.
# Running it again keeps the CA and the secret (synod certs reuses them).
set -eu
cd "$(dirname "$0")"

uid=$(id -u) gid=$(id -g)
if [ "$uid" = 0 ]; then uid=65532 gid=65532; fi   # never run the nodes as root

docker compose build n1
mkdir -p tls
docker run --rm --user "$(id -u):$(id -g)" -v "$PWD:/work" --entrypoint /usr/local/bin/synod \
    synod:latest certs --config /work/cluster.yaml --out /work/tls --client app

mkdir -p nodes
secret=$(cat tls/secret.txt)
sed "s|^secret: .*|secret: $secret|" cluster.yaml > nodes/cluster.yaml

for id in n1 n2 n3; do
    mkdir -p "nodes/$id/tls" "nodes/$id/data"
    cp tls/ca.crt "tls/node-$id.crt" "tls/node-$id.key" "nodes/$id/tls/"
    chmod 0700 "nodes/$id/data"
    chmod 0600 "nodes/$id/tls/node-$id.key"
done
if [ "$(id -u)" = 0 ]; then chown -R "$uid:$gid" nodes; fi
printf 'SYNOD_UID=%s\nSYNOD_GID=%s\n' "$uid" "$gid" > .env
echo "ready: docker compose up -d; then"
echo "  redis-cli --tls --cacert tls/ca.crt -p 6381 PING"
