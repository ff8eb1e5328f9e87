// `require('unit-http')` for apps written for NGINX Unit: under rein it is Node's own `http` module
// (createServer, Server, IncomingMessage, ServerResponse, STATUS_CODES, METHODS, ...). The listening socket
// is supplied by rein's preload, so `server.listen(anything)` serves on the socket rein created.
'use strict';

module.exports = require('http');
