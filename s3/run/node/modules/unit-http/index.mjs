// `import ... from 'unit-http'` for ES-module apps written for NGINX Unit. ES-module resolution ignores
// NODE_PATH, so rein's preload registers `hooks.mjs`, which resolves the bare specifier 'unit-http' to this
// file: Node's own `http` module, as its default export and with all its named exports.
export * from 'node:http';
export { default } from 'node:http';
