// A `.js` ES module (its package.json says "type": "module") written for NGINX Unit.
import { createServer } from 'unit-http';

const tag = process.argv[2] || 'pkg';
createServer((req, res) => res.end(`esm:${tag}:${process.pid}`)).listen(8080);
