#!/bin/sh
# A throw-away CA and a server certificate for the broker "kafka", for deploy/compose/sasl-ssl.yml.
# Writes deploy/compose/certs/{ca.crt, kafka.pem}; kafka.pem holds the key and the certificate, as
# Kafka's PEM keystore takes them. Never use these certificates outside a local try-out.
set -eu
cd "$(dirname "$0")"
mkdir -p certs && cd certs
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj /CN=streameval-local-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
openssl req -newkey rsa:2048 -nodes -keyout kafka.key -out kafka.csr -subj /CN=kafka
printf 'subjectAltName=DNS:kafka,DNS:localhost\nextendedKeyUsage=serverAuth\n' > kafka.ext
openssl x509 -req -in kafka.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kafka.crt -days 30 -extfile kafka.ext
openssl pkcs8 -topk8 -nocrypt -in kafka.key -out kafka.pk8
cat kafka.pk8 kafka.crt > kafka.pem
chmod 644 kafka.pem ca.crt  # the broker runs as a non-root user in its image
rm -f kafka.csr kafka.ext kafka.key kafka.pk8 ca.srl
echo "wrote $(pwd)/ca.crt and $(pwd)/kafka.pem"
