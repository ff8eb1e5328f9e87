// A small HTTP/1.1 backend for rein's proxy tests (Node's `http` and `https` modules only).
//
// Usage: node http_backend.js NAME LISTEN [CERT KEY]
//   LISTEN is a TCP port ("0" picks one) on 127.0.0.1, or "unix:/path". With CERT and KEY (PEM files: the
//   certificate chain and its key) it serves HTTPS.
// Prints the bound port (or the socket path) on its first line of stdout.
//
// Every answer carries `X-Backend: NAME`. Endpoints: /whoami, /echo (the request body, however it came),
// /headers ({"method", "target", "headers": [[name, value]...]}), /status?code=N, /stream?n=N (N chunks of
// "chunkI;" with no Content-Length, so Node sends them chunked, and a trailer), /connections (connections
// accepted so far: TLS handshakes completed, for HTTPS), /count?path=P (requests received for path P).
'use strict';

const http = require('http');
const https = require('https');
const fs = require('fs');

const [name, listen, cert, key] = process.argv.slice(2);

let connections = 0;
const requests = new Map();

const handler = (req, res) => {
  const url = new URL(req.url, 'http://backend');
  requests.set(url.pathname, (requests.get(url.pathname) || 0) + 1);
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const send = (status, data, type = 'text/plain', extra = {}) => {
      const buf = Buffer.isBuffer(data) ? data : Buffer.from(data);
      res.writeHead(status, {
        'Content-Type': type,
        'Content-Length': buf.length,
        'X-Backend': name,
        ...extra,
      });
      res.end(buf);
    };
    switch (url.pathname) {
      case '/whoami':
        return send(200, name);
      case '/echo':
        return send(200, body, 'application/octet-stream', {
          'X-Request-Chunked': String(/chunked/i.test(req.headers['transfer-encoding'] || '')),
        });
      case '/headers': {
        const pairs = [];
        for (let i = 0; i < req.rawHeaders.length; i += 2) {
          pairs.push([req.rawHeaders[i], req.rawHeaders[i + 1]]);
        }
        return send(200, JSON.stringify({ method: req.method, target: req.url, headers: pairs }),
          'application/json');
      }
      case '/stream': {
        const n = Number(url.searchParams.get('n') || 3);
        res.writeHead(200, { 'Content-Type': 'text/plain', 'X-Backend': name, Trailer: 'X-Done' });
        for (let i = 0; i < n; i++) res.write(`chunk${i};`);
        res.addTrailers({ 'X-Done': 'yes' });
        return res.end();
      }
      case '/connections':
        return send(200, String(connections));
      case '/count':
        return send(200, String(requests.get(url.searchParams.get('path')) || 0));
      case '/status': {
        const code = Number(url.searchParams.get('code') || 200);
        return send(code, `status ${code} from ${name}`, 'text/plain', { 'X-Custom': 'yes' });
      }
      default:
        return send(404, 'no such endpoint');
    }
  });
};

const server = cert
  ? https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, handler)
  : http.createServer(handler);
server.on(cert ? 'secureConnection' : 'connection', () => { connections += 1; });

if (listen.startsWith('unix:')) {
  const path = listen.slice(5);
  try { fs.unlinkSync(path); } catch (_) { /* not there */ }
  server.listen(path, () => console.log(path));
} else {
  server.listen(Number(listen), '127.0.0.1', () => console.log(server.address().port));
}
