'use strict';
// The Node.js host of streameval's code evaluator. One host per pool slot, started confined by
// `python -m streameval.sandbox._launch` (network namespace, Landlock read-only, seccomp, rlimits)
// with an empty environment. It reads frames (4-byte big-endian length + JSON) on stdin:
//   {code, args: {input, output, expected, metadata}, timeout_ms}
// and answers each with {ok: <value returned by evaluate>} or {error: kind, message}.
//
// Every call runs in a fresh vm context: code generation from strings off,
// microtaskMode "afterEvaluate" so promise jobs count against the timeout, no timers, no process,
// no host objects. The event is passed as JSON text and parsed inside the context, and the result
// is serialised inside it, so the code never holds an object of the host's realm (the classic
// `x.constructor.constructor("return process")()` escape needs one). The allowed modules (the
// evaluator-module spec §4.2: lodash, dayjs, validator, ajv) are evaluated inside each fresh context from
// scripts compiled once per host, so a polluted prototype dies with its context. ajv, which compiles
// schemas with `new Function`, runs in a second fresh context and is reached through a JSON-only bridge.

const vm = require('vm');
const fs = require('fs');
const path = require('path');
const { types } = require('util');

const MODULES = ['lodash', 'dayjs', 'validator', 'ajv']; // the evaluator-module spec §4.2
const NODE_MODULES = path.join(__dirname, 'node_modules');
const MAX_RESULT_BYTES = 64 * 1024; // same cap as the Python sandbox
const CODE_CACHE = 256;

const WRAP_HEAD = '(function (exports, require, module, __filename, __dirname) {';
const WRAP_TAIL = '\n})';

// The context's own runtime: a CommonJS `require` over the modules the host registered, a silent
// console, `global`/`self` (lodash looks for them instead of calling Function('return this')).
const BOOT = new vm.Script(`(function () {
  'use strict';
  const g = globalThis;
  const table = Object.create(null);
  const cache = Object.create(null);
  const noop = function () {};
  g.global = g; g.self = g;
  g.console = { log: noop, info: noop, warn: noop, error: noop, debug: noop, trace: noop, dir: noop };
  function load(file) {
    if (cache[file]) return cache[file].exports;
    const entry = table[file];
    const module = { exports: {} };
    cache[file] = module;
    const localRequire = function (request) {
      const target = entry.deps[request];
      if (target === undefined) throw new Error('module ' + JSON.stringify(request) + ' is not available in the sandbox');
      return load(target);
    };
    if (entry.json !== undefined) module.exports = JSON.parse(entry.json);
    else entry.fn.call(module.exports, module.exports, localRequire, module, file, '');
    return module.exports;
  }
  // ajv runs in a separate realm (it needs code generation, this context has none); the code gets
  // a stand-in class here whose methods send JSON text to that realm and get JSON text back. The
  // realm's function stays in this closure, so the code never holds an object of that realm.
  let ajvCall = null;
  const ajvShims = Object.create(null);
  function ajvShim(flavor) {
    if (ajvShims[flavor]) return ajvShims[flavor];
    const call = ajvCall;
    const invoke = function (op, payload) {
      let text;
      try { text = call(op, JSON.stringify(payload)); } catch (_) { throw new Error('ajv failed inside the sandbox'); }
      const reply = JSON.parse(text);
      if (reply.e !== undefined) throw new Error(reply.e);
      return reply.r;
    };
    const validator = function (vid, schema) {
      const v = function (data) { const r = invoke('run', { vid: vid, data: data }); v.errors = r.errors; return r.ok; };
      v.errors = null;
      v.schema = schema;
      return v;
    };
    class Ajv {
      constructor(opts) { this.errors = null; this._id = invoke('new', { flavor: flavor, opts: opts || {} }); }
      compile(schema) { return validator(invoke('compile', { id: this._id, schema: schema }), schema); }
      validate(schema, data) {
        const r = invoke('validate', { id: this._id, schema: schema, data: data });
        this.errors = r.errors;
        return r.ok;
      }
      errorsText(errors, opts) {
        return invoke('errorsText', { id: this._id, errors: errors === undefined ? this.errors : errors, opts: opts });
      }
      addSchema(schema, key) { invoke('addSchema', { id: this._id, schema: schema, key: key }); return this; }
      getSchema(key) { const vid = invoke('getSchema', { id: this._id, key: key }); return vid < 0 ? undefined : validator(vid); }
      removeSchema(key) { invoke('removeSchema', { id: this._id, key: key }); return this; }
      addFormat(name, format) {
        const payload = { id: this._id, name: name };
        if (format instanceof RegExp) payload.regex = { source: format.source, flags: format.flags };
        else if (typeof format === 'string' || typeof format === 'boolean') payload.format = format;
        else throw new Error('in the sandbox ajv formats must be a RegExp, a string or a boolean');
        invoke('addFormat', payload);
        return this;
      }
      addKeyword() { throw new Error('ajv.addKeyword is not available in the sandbox (keywords need functions)'); }
    }
    Ajv.default = Ajv;
    Ajv.Ajv = Ajv;
    ajvShims[flavor] = Ajv;
    return Ajv;
  }
  return {
    register: function (file, fn, depsJson, json) { table[file] = { fn: fn, deps: JSON.parse(depsJson), json: json }; },
    load: load,
    setAjv: function (call) { ajvCall = call; },
    require: function (topDeps, ajvDeps) {
      return function require(request) {
        if (ajvDeps[request] !== undefined && ajvCall !== null) return ajvShim(ajvDeps[request]);
        const target = topDeps[request];
        if (target === undefined) {
          throw new Error('module ' + JSON.stringify(request) + ' is not available in code evaluators; allowed: ${MODULES.join(', ')}');
        }
        return load(target);
      };
    },
  };
})()`, { filename: 'streameval-boot.js' });

const DRIVER = new vm.Script(`(function () {
  'use strict';
  const g = globalThis;
  const describe = function (e) {
    try {
      if (e instanceof Error) return String(e.name) + ': ' + String(e.message);
      return 'threw ' + String(e);
    } catch (_) { return 'threw a value that cannot be shown'; }
  };
  const fail = function (e) { g.__se_out = JSON.stringify({ error: 'exception', message: describe(e) }); };
  let fn, a;
  try {
    const module = { exports: {} };
    g.__se_user.call(module.exports, module.exports, g.__se_require, module, 'evaluator.js', '');
    fn = module.exports;
    if (typeof fn !== 'function' && fn && typeof fn.evaluate === 'function') fn = fn.evaluate;
    if (typeof fn !== 'function') throw new TypeError('the code must set module.exports = async function evaluate(input, output, expected, metadata)');
    a = JSON.parse(g.__se_args);
  } catch (e) { fail(e); return; }
  Promise.resolve()
    .then(function () { return fn(a.input, a.output, a.expected, a.metadata); })
    .then(function (v) {
      try { g.__se_out = JSON.stringify({ ok: v === undefined ? null : v }); }
      catch (e) { g.__se_out = JSON.stringify({ error: 'exception', message: 'the result is not JSON-serialisable: ' + describe(e) }); }
    }, fail);
})()`, { filename: 'streameval-driver.js' });

// Runs in the ajv realm: one function taking (operation, JSON text) and returning JSON text, never
// throwing, so nothing of this realm crosses into the code's context.
const AJV_BRIDGE = new vm.Script(`(function (load) {
  'use strict';
  const instances = [];
  const validators = [];
  const keep = function (v) { validators.push(v); return validators.length - 1; };
  return function call(op, json) {
    try {
      const a = JSON.parse(json);
      const ajv = instances[a.id];
      let r = null;
      if (op === 'new') {
        const C = load(a.flavor);
        const Ctor = typeof C === 'function' ? C : C.default;
        instances.push(new Ctor(a.opts));
        r = instances.length - 1;
      } else if (op === 'compile') r = keep(ajv.compile(a.schema));
      else if (op === 'run') { const v = validators[a.vid]; r = { ok: !!v(a.data), errors: v.errors || null }; }
      else if (op === 'validate') r = { ok: !!ajv.validate(a.schema, a.data), errors: ajv.errors || null };
      else if (op === 'errorsText') r = ajv.errorsText(a.errors, a.opts);
      else if (op === 'addSchema') ajv.addSchema(a.schema, a.key);
      else if (op === 'getSchema') { const v = ajv.getSchema(a.key); r = v ? keep(v) : -1; }
      else if (op === 'removeSchema') ajv.removeSchema(a.key);
      else if (op === 'addFormat') ajv.addFormat(a.name, a.regex ? new RegExp(a.regex.source, a.regex.flags) : a.format);
      else throw new Error('unknown ajv operation ' + op);
      return JSON.stringify({ r: r });
    } catch (e) {
      let message;
      try { message = String(e && e.message); } catch (_) { message = 'ajv failed'; }
      return JSON.stringify({ e: message });
    }
  };
})`, { filename: 'streameval-ajv-bridge.js' });

const TAKE = new vm.Script('globalThis.__se_out', { filename: 'streameval-take.js' });

// -- module files: resolved and compiled once per host ---------------------------------------
const files = new Map(); // absolute path -> {script | json, deps: {request: path}}

function requiresOf(source) {
  const found = new Set();
  const pattern = /\brequire\(\s*(['"])([^'"\n]+)\1\s*\)/g;
  let m;
  while ((m = pattern.exec(source)) !== null) found.add(m[2]);
  return [...found];
}

function prepareFile(file) {
  if (files.has(file)) return;
  const source = fs.readFileSync(file, 'utf8');
  const entry = { deps: {} };
  files.set(file, entry);
  if (file.endsWith('.json')) {
    entry.json = source;
    return;
  }
  entry.script = new vm.Script(WRAP_HEAD + source + WRAP_TAIL, { filename: file });
  for (const request of requiresOf(source)) {
    let target;
    try { target = require.resolve(request, { paths: [path.dirname(file)] }); } catch (_) { continue; }
    if (!target.startsWith(NODE_MODULES + path.sep)) continue; // node built-ins stay unavailable
    entry.deps[request] = target;
    prepareFile(target);
  }
}

// The top-level requests a piece of user code may make: the allowed packages and their subpaths.
function resolveTop(code) {
  const top = {};
  for (const request of requiresOf(code)) {
    const name = request.split('/')[0];
    if (!MODULES.includes(name)) continue;
    let target;
    try { target = require.resolve(request, { paths: [NODE_MODULES] }); } catch (_) { continue; }
    if (!target.startsWith(NODE_MODULES + path.sep)) continue;
    prepareFile(target);
    top[request] = target;
  }
  return top;
}

function closure(top) {
  const seen = new Set();
  const stack = Object.values(top);
  while (stack.length) {
    const file = stack.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    stack.push(...Object.values(files.get(file).deps));
  }
  return seen;
}

// -- user code: compiled once per distinct text ------------------------------------------------
const compiled = new Map();

function userEntry(code) {
  let entry = compiled.get(code);
  if (entry) {
    compiled.delete(code);
    compiled.set(code, entry);
    return entry;
  }
  const all = resolveTop(code);
  const top = {};
  const ajvTop = {};
  for (const [request, file] of Object.entries(all)) {
    if (request.split('/')[0] === 'ajv') ajvTop[request] = file;
    else top[request] = file;
  }
  entry = {
    script: new vm.Script(WRAP_HEAD + code + WRAP_TAIL, { filename: 'evaluator.js' }),
    top,
    ajvTop,
    files: [...closure(top)],
    ajvFiles: [...closure(ajvTop)],
  };
  compiled.set(code, entry);
  if (compiled.size > CODE_CACHE) compiled.delete(compiled.keys().next().value);
  return entry;
}

function register(boot, context, fileList) {
  for (const file of fileList) {
    const f = files.get(file);
    const fn = f.script ? f.script.runInContext(context) : undefined;
    boot.register(file, fn, JSON.stringify(f.deps), f.json);
  }
}

// The vm's timeout error is created in the context's realm, so it is recognised by an own data
// property read without running anything (no getters, no proxy traps).
function isTimeout(e) {
  if (typeof e !== 'object' || e === null || types.isProxy(e)) return false;
  const code = Object.getOwnPropertyDescriptor(e, 'code');
  return code !== undefined && 'value' in code && code.value === 'ERR_SCRIPT_EXECUTION_TIMEOUT';
}

function evaluate(request) {
  const entry = userEntry(request.code);
  const timeout = request.timeout_ms;
  const context = vm.createContext(Object.create(null), {
    codeGeneration: { strings: false, wasm: false },
    microtaskMode: 'afterEvaluate',
  });
  const boot = BOOT.runInContext(context);
  register(boot, context, entry.files);
  if (entry.ajvFiles.length) {
    // A fresh ajv realm per call too: whatever a schema does there dies with the call.
    const realm = vm.createContext(Object.create(null), { codeGeneration: { strings: true, wasm: false } });
    const realmBoot = BOOT.runInContext(realm);
    register(realmBoot, realm, entry.ajvFiles);
    boot.setAjv(AJV_BRIDGE.runInContext(realm)(realmBoot.load));
  }
  const inContext = (value) => vm.runInContext('(' + JSON.stringify(value) + ')', context);
  context.__se_require = boot.require(inContext(entry.top), inContext(entry.ajvTop));
  context.__se_user = entry.script.runInContext(context);
  context.__se_args = JSON.stringify(request.args);
  try {
    DRIVER.runInContext(context, { timeout });
    const out = TAKE.runInContext(context, { timeout });
    if (typeof out !== 'string') {
      return { error: 'exception', message: 'evaluate() did not settle: its promise never resolved (there are no timers in the sandbox)' };
    }
    if (Buffer.byteLength(out) > MAX_RESULT_BYTES) {
      return { error: 'too_large', message: `the result is larger than ${MAX_RESULT_BYTES} bytes` };
    }
    return out;
  } catch (e) {
    // Only the vm's own errors arrive here (the driver catches the code's): never touch anything
    // else, since a context object's getters would run outside the timeout.
    if (isTimeout(e)) {
      return { error: 'timeout', message: `timeout: the code ran longer than ${timeout} ms` };
    }
    return { error: 'exception', message: 'the code failed in a way the sandbox cannot describe' };
  }
}

// -- framing on stdin/stdout -------------------------------------------------------------------
function send(reply) {
  const body = Buffer.from(typeof reply === 'string' ? reply : JSON.stringify(reply));
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  fs.writeSync(1, Buffer.concat([head, body]));
}

let pending = Buffer.alloc(0);
process.stdin.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  while (pending.length >= 4) {
    const size = pending.readUInt32BE(0);
    if (pending.length < 4 + size) break;
    const request = JSON.parse(pending.subarray(4, 4 + size).toString('utf8'));
    pending = pending.subarray(4 + size);
    let reply;
    try {
      reply = evaluate(request);
    } catch (e) {
      reply = { error: 'exception', message: 'the sandbox could not run the code: ' + String(e && e.message) };
    }
    send(reply);
  }
});
process.stdin.on('end', () => process.exit(0));
send({ ready: true });
