// Drives the PM2 daemon of $PM2_HOME for bench/run-all through PM2's programmatic API, so that polling its
// process list costs one IPC round trip instead of starting the pm2 CLI each time.
//
// Reads one command per line on stdin, answers one JSON line on stdout:
//   list          -> {"procs": [{"pid": N, "status": "online", "uptime_s": S, "name": "hello"}, ...]}
//   reload NAME   -> {"ok": true, "seconds": S}          (pm2 reload: a rolling reload in cluster mode)
// Needs NODE_PATH to hold the `pm2` package (bench/.tools/node_modules).
'use strict';

const pm2 = require('pm2');
const readline = require('readline');

function answer(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

pm2.connect((err) => {
  if (err) {
    answer({ error: `connect: ${err.message || err}` });
    process.exit(1);
  }
  answer({ connected: true });
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    const [cmd, arg] = line.trim().split(/\s+/);
    if (cmd === 'list') {
      pm2.list((e, list) => {
        if (e) return answer({ error: String(e.message || e) });
        const now = Date.now();
        answer({
          procs: list.map((p) => ({
            pid: p.pid,
            name: p.name,
            status: p.pm2_env && p.pm2_env.status,
            uptime_s: p.pm2_env && p.pm2_env.pm_uptime ? (now - p.pm2_env.pm_uptime) / 1000 : null,
            restarts: p.pm2_env && p.pm2_env.restart_time,
          })),
        });
      });
    } else if (cmd === 'reload') {
      const t0 = process.hrtime.bigint();
      pm2.reload(arg, (e) => {
        const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
        answer(e ? { ok: false, seconds, error: String(e.message || e) } : { ok: true, seconds });
      });
    } else if (cmd === 'quit') {
      pm2.disconnect();
      process.exit(0);
    } else {
      answer({ error: `unknown command ${cmd}` });
    }
  });
  rl.on('close', () => {
    pm2.disconnect();
    process.exit(0);
  });
});
