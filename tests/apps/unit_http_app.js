// An app written for NGINX Unit: `require('unit-http')` and listen on any port.
'use strict';

const http = require('unit-http');

http
  .createServer((req, res) => res.end(`unit-http:${process.pid}`))
  .listen(8080);
