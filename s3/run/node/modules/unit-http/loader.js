// rein's stand-in for unit-http/loader, which Unit's Node.js setup preloads (`--require unit-http/loader`):
// rein's own preload already makes `listen()` use the socket rein passes, so there is nothing left to do.
