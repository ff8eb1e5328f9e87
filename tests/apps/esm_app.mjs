// An ES-module app written for NGINX Unit: `import ... from 'unit-http'` (default and named imports) and listen
// on any port. Under rein, 'unit-http' resolves to Node's `http` and listen() takes the socket rein passes.
//
// Usage: node esm_app.mjs TAG — answers every request with `esm:TAG:PID`.
import http, { createServer } from 'unit-http';

const tag = process.argv[2] || 'esm';
if (http.createServer !== createServer) {
  throw new Error('the default and the named import of unit-http differ');
}
createServer((req, res) => res.end(`esm:${tag}:${process.pid}`)).listen(8080, () =>
  console.log(`esm_app ${tag} listening, pid ${process.pid}`),
);
