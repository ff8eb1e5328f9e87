// rein's Node.js preload (loaded with `node --require`, set in NODE_OPTIONS by rein).
//
// rein creates each instance's listening socket itself and passes it as fd 3 (systemd socket activation:
// LISTEN_FDS=1, LISTEN_PID=<this process>). So that apps work unmodified, the first `listen(...)` call in
// this process listens on that fd instead of whatever port or path it asked for. Later calls (a second
// server, an admin port) are left alone. A child process that inherited the variables (LISTEN_PID is not
// its pid) does not take the socket.
//
// ES-module apps (`import http from 'unit-http'`): ES-module resolution ignores NODE_PATH, so when the entry
// point is an ES module this preload registers `hooks.mjs` (`module.register`, Node >= 20.6 / 18.19), which
// resolves 'unit-http' to rein's alias of `http`. CommonJS apps do without: the hooks run in a thread of
// their own, which would cost every Node.js instance some start-up time and memory.
'use strict';

const fs = require('fs');
const kListener = Symbol('rein.listener');
const net = require('net');
const path = require('path');

const fds = Number(process.env.LISTEN_FDS || 0);
const pid = process.env.LISTEN_PID;
// `"handoff": true`: rein passes client connections over Node's IPC channel (NODE_CHANNEL_FD, which Node
// has opened as `process.send` by now). Not for a child process this app starts.
const handoff = process.env.REIN_HANDOFF === '1' && typeof process.send === 'function';
delete process.env.REIN_HANDOFF;

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
    if (handoff) {
      takeConnections(this);
    }
    return callback ? original.call(this, { fd: 3 }, callback) : original.call(this, { fd: 3 });
  };
}

/**
 * Serves the client connections rein passes (`{"rein": "connection"}` with a socket) on `server`, as if
 * it had accepted them. On `{"rein": "drain"}` (the instance is being replaced or stopped), hands each
 * idle one back to rein — no request begun on it, nothing left to write — rather than closing it, the
 * others as their responses end, and says `{"rein": "drained"}` once it holds none of them.
 */
function takeConnections(server) {
  let draining = false;
  // Connections taken from rein in all, those still held, and the count last reported drained at: rein
  // stops the instance only once it has heard of every connection it passed.
  let taken = 0;
  let held = 0;
  let told = -1;
  const connections = () => {
    const key = Object.getOwnPropertySymbols(server).find((s) => s.description === 'http.server.connections');
    return key ? server[key] : undefined;
  };
  const later = () => setImmediate(sweep);
  const giveBack = (socket, listener) => {
    // Stop reading: what the client sends next stays in the kernel for rein to read.
    socket._handle.readStop();
    if (typeof socket.parser?.unconsume === 'function') {
      socket.parser.unconsume();
    }
    // Not `socket.server`: Node would then track the socket as a cluster worker's.
    socket.server = null;
    process.send({ rein: 'back', listener }, socket, () => socket.destroy());
  };
  const idle = (socket) => {
    if (socket._httpMessage) {
      return false;
    }
    if (socket.writableLength > 0) {
      socket.once('drain', later);
      return false;
    }
    return true;
  };
  function sweep() {
    const list = connections();
    for (const parser of list ? list.idle() : []) {
      const socket = parser.socket;
      if (!socket || socket[kListener] === undefined || !socket._handle || socket.destroyed || !idle(socket)) {
        continue;
      }
      giveBack(socket, socket[kListener]);
    }
    if (held === 0 && told !== taken) {
      told = taken;
      process.send({ rein: 'drained', taken });
    }
  }
  const drain = () => {
    draining = true;
    const list = connections();
    for (const parser of list ? list.active() : []) {
      parser.socket?._httpMessage?.once('finish', later);
    }
    server.on('request', (req, res) => res.once('finish', later));
    sweep();
  };
  process.on('message', (message, socket) => {
    if (!message || typeof message !== 'object') {
      return;
    }
    if (message.rein === 'connection' && socket) {
      taken++;
      if (draining) {
        if (socket._handle) {
          giveBack(socket, message.listener);
        }
        sweep();
        return;
      }
      socket[kListener] = message.listener;
      held++;
      socket.once('close', () => {
        held--;
        if (draining) {
          later();
        }
      });
      // What net.Server does for a connection it accepts, so that close() and getConnections() count it.
      server._connections++;
      socket.server = server;
      socket._server = server;
      server.emit('connection', socket);
    } else if (message.rein === 'drain' && !draining) {
      drain();
    }
  });
}

/** Whether the process runs an ES module: `--input-type=module` or `--experimental-default-type=module`, a
 * `.mjs` entry point, or a `.js` (or extension-less) one whose nearest package.json says `"type": "module"`. */
function entryIsModule() {
  const flags = process.execArgv.concat((process.env.NODE_OPTIONS || '').split(/\s+/));
  if (flags.some((f) => f === '--input-type=module' || f === '--experimental-default-type=module')) {
    return true;
  }
  const main = process.argv[1];
  if (!main) {
    return false; // `node -e` (CommonJS unless --input-type=module) or the REPL
  }
  let file = path.resolve(main);
  try {
    file = fs.realpathSync(require.resolve(file));
  } catch (_) {
    // Not resolvable as CommonJS (a directory, an unknown extension): judged by its name.
  }
  if (file.endsWith('.mjs')) {
    return true;
  }
  if (file.endsWith('.cjs') || file.endsWith('.json') || file.endsWith('.node')) {
    return false;
  }
  for (let dir = path.dirname(file); ; ) {
    let text;
    try {
      text = fs.readFileSync(path.join(dir, 'package.json'), 'utf8');
    } catch (_) {
      const parent = path.dirname(dir);
      if (parent === dir) {
        return false;
      }
      dir = parent;
      continue;
    }
    try {
      return JSON.parse(text).type === 'module';
    } catch (_) {
      return false;
    }
  }
}

const { register } = require('module');
if (typeof register === 'function' && entryIsModule()) {
  try {
    register(require('url').pathToFileURL(path.join(__dirname, 'hooks.mjs')));
  } catch (e) {
    process.stderr.write(`rein: cannot register the 'unit-http' hook for ES modules: ${e.message}\n`);
  }
}
