// An HTTP/2 client (Node's http2) that POSTs a body slowly, for rein's tests.
// Usage: h2_upload.js URL BYTES_PER_TICK TICK_MS TOTAL_BYTES [stall]
//   Sends TOTAL_BYTES in pieces of BYTES_PER_TICK every TICK_MS (with "stall": the first piece, then nothing).
// Prints the response's status (or "error CODE"), then exits.
const http2 = require('http2');
const [url, perTick, tickMs, total, mode] = process.argv.slice(2);
const u = new URL(url);
const session = http2.connect(u.origin);
session.on('error', (e) => { console.log('error ' + (e.code || e.message)); process.exit(0); });
const req = session.request({ ':method': 'POST', ':path': u.pathname, 'content-type': 'application/octet-stream' });
let sent = 0;
const timer = setInterval(() => {
  if (sent >= Number(total) || (mode === 'stall' && sent > 0)) return;
  const n = Math.min(Number(perTick), Number(total) - sent);
  req.write(Buffer.alloc(n, 120));
  sent += n;
  if (sent >= Number(total)) req.end();
}, Number(tickMs));
req.on('response', (headers) => {
  console.log(String(headers[':status']));
  clearInterval(timer);
  session.destroy();
  process.exit(0);
});
req.on('error', (e) => { console.log('error ' + (e.code || e.message)); process.exit(0); });
