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
const net = require('net');
const path = require('path');

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
