// rein's Node.js preload (loaded with `node --require`, set in NODE_OPTIONS by rein).
//
// rein creates each instance's listening socket itself and passes it as fd 3 (systemd socket activation:
// LISTEN_FDS=1, LISTEN_PID=<this process>). So that apps work unmodified, the first `listen(...)` call in
// this process listens on that fd instead of whatever port or path it asked for. Later calls (a second
// server, an admin port) are left alone. A child process that inherited the variables (LISTEN_PID is not
// its pid) does not take the socket.
'use strict';

const net = require('net');

const fds = Number(process.env.LISTEN_FDS || 0);
const pid = process.env.LISTEN_PID;

if (fds >= 1 && (pid === undefined || pid === String(process.pid))) {
  const original = net.Server.prototype.listen;
  let taken = false;
  net.Server.prototype.listen = function listen(...args) {
    if (taken) {
      return original.apply(this, args);
    }
    taken = true;
    net.Server.prototype.listen = original;
    const callback = typeof args[args.length - 1] === 'function' ? args[args.length - 1] : undefined;
    let asked;
    try {
      asked = args.length === 0 || typeof args[0] === 'function' ? 'no address' : JSON.stringify(args[0]);
    } catch (_) {
      asked = String(args[0]);
    }
    process.stderr.write(
      `rein: listen(${asked}) uses the socket passed by rein (fd 3` +
        `${process.env.REIN_SOCKET ? ', ' + process.env.REIN_SOCKET : ''})\n`,
    );
    return callback ? original.call(this, { fd: 3 }, callback) : original.call(this, { fd: 3 });
  };
}
