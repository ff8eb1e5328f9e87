// A minimal app for rein's application tests: rein's Node preload makes listen() use the socket it passes.
require('http').createServer((q, s) => s.end('hi')).listen(3000);
