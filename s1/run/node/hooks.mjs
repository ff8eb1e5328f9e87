// rein's ES-module resolve hook (registered by preload.js with `module.register`, only for apps whose entry
// point is an ES module): the bare specifier 'unit-http' resolves to rein's alias of Node's `http`, as
// `require('unit-http')` does through NODE_PATH. Every other specifier is left to Node.
const UNIT_HTTP = new URL('./modules/unit-http/index.mjs', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if (specifier === 'unit-http') {
    return { url: UNIT_HTTP, format: 'module', shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
