// An unmodified Node.js app for rein's supervisor tests: it listens on port 3000 like any app would; under
// rein, the preload makes that listen() use the socket rein passes as fd 3.
//
// Usage: node node_app.js TAG [--fail-at-start]
// Answers every request with `node:TAG:PID` (`/peer`: the client's port as this process sees it);
// `--fail-at-start` exits 1 before listening (a broken release).
'use strict';

const http = require('http');

const tag = process.argv[2] || 'node';
if (process.argv.includes('--fail-at-start')) {
  console.error(`node_app ${tag}: failing at start`);
  process.exit(1);
}
http
  .createServer((req, res) => {
    const body = req.url === '/peer' ? String(req.socket.remotePort) : `node:${tag}:${process.pid}`;
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  })
  .listen(3000, () => console.log(`node_app ${tag} listening, pid ${process.pid}`));
