#!/usr/bin/env bash
# Audits rein's TLS with a real scanner (testssl.sh, Debian's package): rein serves an ECDSA P-256 and an RSA 2048
# bundle from a private CA on a loopback port, and testssl.sh runs its whole default scan against it.
# Prints testssl's findings of severity LOW and above and exits 1 if any is HIGH or CRITICAL.
# Usage: scripts/tls-audit.sh [path/to/rein]   (default: builds and uses target/debug/rein)
# TLS_AUDIT_KEEP=DIR keeps testssl's whole report (findings.json, testssl.txt) in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v testssl >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq testssl.sh; }
command -v jq >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq; }
rein=${1:-}
if [ -z "$rein" ]; then
    cargo build -q
    rein=target/debug/rein
fi

work=$(mktemp -d)
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"

# A private CA and two leaves for "audit.test".
# The leaves look like a public CA's (a year of validity, a CRL distribution point), and testssl is given the
# CA (--add-ca) and the name (audit.test, at 127.0.0.1): what it reports is then about rein, not the test PKI.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
    -subj "/CN=rein audit CA" -days 400 2>/dev/null
leaf() { # NAME KEYARGS...
    local name=$1; shift
    openssl req -newkey "$@" -nodes -keyout "$name.key" -out "$name.csr" -subj "/CN=audit.test" 2>/dev/null
    printf 'subjectAltName=DNS:audit.test\nextendedKeyUsage=serverAuth\ncrlDistributionPoints=URI:http://audit.test/ca.crl\n' > ext.cnf
    openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
        -extfile ext.cnf -out "$name.crt" 2>/dev/null
    cat "$name.crt" ca.pem "$name.key" > "$name.pem"
}
leaf ecdsa ec -pkeyopt ec_paramgen_curve:P-256
leaf rsa rsa:2048

echo '{}' > empty.json
"$OLDPWD/$rein" run --state state --control "unix:$work/control.sock" --config empty.json --log rein.log &
echo $! > pid
api() { curl -sS --unix-socket "$work/control.sock" "$@"; }
for _ in $(seq 100); do [ -S control.sock ] && break; sleep 0.1; done
api -X PUT --data-binary @ecdsa.pem http://localhost/certificates/ecdsa >/dev/null
api -X PUT --data-binary @rsa.pem http://localhost/certificates/rsa >/dev/null
api -X PUT -d '{"listeners": {"127.0.0.1:0": {"pass": "routes", "tls": {"certificate": ["ecdsa", "rsa"]}}},
                "routes": [{"action": {"return": 200}}]}' http://localhost/config >/dev/null
addr=$(api http://localhost/status/listeners/127.0.0.1:0/address | tr -d '"')
echo "rein $("$OLDPWD/$rein" --version 2>/dev/null || true) on $addr; testssl $(testssl --version 2>/dev/null | grep -o '3\.[0-9.]*' | head -1)"

port=${addr##*:}
testssl --quiet --color 0 --warnings off --sneaky --add-ca "$work/ca.pem" --ip 127.0.0.1 \
    --jsonfile findings.json "https://audit.test:$port" > testssl.txt 2>&1 || true
[ -z "${TLS_AUDIT_KEEP:-}" ] || cp findings.json testssl.txt "$TLS_AUDIT_KEEP"/
echo "findings of severity LOW and above:"
jq -r '.[] | select(.severity == "LOW" or .severity == "MEDIUM" or .severity == "HIGH" or .severity == "CRITICAL")
       | "  \(.severity)\t\(.id)\t\(.finding)"' findings.json
echo "counts by severity:"
jq -r 'group_by(.severity)[] | "  \(.[0].severity)\t\(length)"' findings.json
bad=$(jq '[.[] | select(.severity == "HIGH" or .severity == "CRITICAL")] | length' findings.json)
[ "$bad" = 0 ] || { echo "tls-audit: $bad finding(s) of HIGH or CRITICAL severity"; exit 1; }
echo "tls-audit: no finding of HIGH or CRITICAL severity"
