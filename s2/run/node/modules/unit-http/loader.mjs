// rein's stand-in for unit-http/loader.mjs, Unit's ES-module loader (`--loader unit-http/loader.mjs`): rein's
// preload already resolves `unit-http` and takes over `listen()`, so this loader has no hooks.
export {};
