// The Node.js hello app every stack in bench/run-all runs: answers every request with {"hello":"world"}.
//
// Standalone:       PORT=8081 node hello.js
// Under PM2:        PORT=8081 pm2 start hello.js -i 2     (cluster mode: the workers share the port)
// Under rein:       rein's preload makes the listen() below use the socket rein passes (fd 3)
// Under Passenger:  Passenger's node loader makes the listen() below use its own socket
'use strict';

const http = require('http');

const body = JSON.stringify({ hello: 'world' });
const len = Buffer.byteLength(body);
const port = process.env.PORT || 3000;

const server = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': len });
  res.end(body);
});
// Longer than the proxies keep idle upstream connections (nginx: 60 s), so a proxy never reuses a connection
// the app is closing; Node's default is 5 s.
server.keepAliveTimeout = 65000;
server.listen(port);

// Graceful stop, as PM2's and rein's docs recommend: finish what is in flight, close idle keep-alive
// connections, exit (at most 3 s later whatever remains).
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 3000).unref();
  });
}
