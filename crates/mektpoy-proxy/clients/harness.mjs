// A harness-like conversation through mektpoy-proxy with the official Anthropic TypeScript SDK
// (`@anthropic-ai/sdk`), the twin of harness.py beside it (same steps, same churn, same output).
//
// Run by run.sh (which starts the stand-in and the proxy and installs the SDK):
//
//     MEKTPOY_NPM_DIR=DIR node harness.mjs --proxy URL --standin URL --run ID --out DIR
//
// MEKTPOY_NPM_DIR is the folder whose node_modules holds the SDK (run.sh installs it under
// target/clients/npm). Prints one `RESULT` line per model x mode x target and exits 1 when a
// request through the proxy failed (each failure's exact request and response is written under
// --out). The direct runs (SDK -> stand-in, claude-fable-5-1 only) are informative.

import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const require = createRequire(join(resolve(process.env.MEKTPOY_NPM_DIR ?? '.'), 'package.json'));
const sdk = require('@anthropic-ai/sdk');
const Anthropic = sdk.Anthropic ?? sdk.default;

const SDK = 'typescript';
const MODELS = ['claude-opus-5', 'claude-fable-5-1', 'deepseek-flash'];
const DIRECT_MODELS = ['claude-fable-5-1'];
const STEPS = 12;
const CACHED = 'x-standin-cached-bytes';
const TOTAL = 'x-standin-total-bytes';
const CONTENT = 'x-standin-content';

const SYSTEM = [
  { type: 'text', text: 'You are a coding agent. ' + 'rules '.repeat(300) },
  { type: 'text', text: 'Environment: a Rust workspace on Linux. ' + 'facts '.repeat(40) },
];

const tool = (name, description) => ({
  name,
  description,
  input_schema: { type: 'object', properties: { arg: { type: 'string' } } },
});

/** The harness's tool list at step i (0-based): the churn of a real session. */
function toolsAt(i) {
  let tools = [tool('read', 'Read a file'), tool('shell', 'Run a command')];
  if (!(i >= 5 && i <= 6)) tools.push(tool('lint', 'Lint the tree')); // off at 5, 6; back at 7
  if (i >= 3) tools.push(tool('mcp__gh__search', 'Search issues'), tool('mcp__gh__issue', 'Open an issue'));
  if (i >= 9) tools.reverse(); // the same tools, listed in another order
  if (i >= 10) for (const t of tools) if (t.name === 'read') t.description = 'Read a file (v2)';
  return tools;
}

function args() {
  const a = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const k of ['proxy', 'standin', 'run', 'out']) {
    if (!a[k]) throw new Error(`--${k} is required`);
  }
  return a;
}

/** JSON with sorted keys: a stream's blocks are rebuilt by the SDK in its own key order. */
const canonical = (v) =>
  JSON.stringify(v, (_, x) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]]))
      : x,
  );

const jsonOrText = (text) => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

/** A fetch that keeps the last request and response it saw, to report a failure exactly. */
function recordingFetch(seen) {
  return async (url, init = {}) => {
    const headers = Object.fromEntries(new Headers(init.headers ?? {}).entries());
    delete headers['x-api-key']; // left out of the failure records
    delete headers.authorization;
    seen.request = { method: init.method ?? 'GET', url: String(url), headers, body: jsonOrText(init.body ?? '') };
    seen.response = null;
    const response = await fetch(url, init);
    if (!response.ok) {
      const body = await response.clone().text();
      seen.response = {
        status: response.status,
        headers: Object.fromEntries(response.headers.entries()),
        body: jsonOrText(body),
      };
    }
    return response;
  };
}

class Failures {
  constructor(out) {
    this.dir = out;
    mkdirSync(out, { recursive: true });
    this.count = 0;
  }

  record(label, step, error, seen, loud) {
    this.count += 1;
    const path = join(this.dir, `${SDK}-${label}-step${step}.json`);
    const record = { sdk: SDK, run: label, step, error: String(error), request: seen.request, response: seen.response };
    writeFileSync(path, JSON.stringify(record, null, 2));
    if (loud) {
      const kind = label.startsWith('direct') ? 'REFUSED' : 'FAIL';
      const status = seen.response?.status ?? error?.status ?? '-';
      const body = JSON.stringify(seen.response?.body ?? String(error)).slice(0, 600);
      console.error(`${kind} ${SDK} ${label} step ${step}: ${status} ${body} (${path})`);
    }
  }
}

async function conversation(client, seen, session, model, stream, failures, label, expected) {
  let history = [];
  let pending = [];
  const out = { requests: 0, refused: 0, cached: 0, total: 0, mismatch: 0 };
  for (let i = 0; i < STEPS; i++) {
    if (i === 11) {
      // A compaction: the client replaces its history with a summary.
      history = [
        { role: 'user', content: 'Summary of the work so far: steps 0 to 10.' },
        { role: 'assistant', content: [{ type: 'text', text: 'Understood.' }] },
      ];
      pending = [];
    }
    const user = [...pending, { type: 'text', text: `step ${i}: go on. ` + 'context '.repeat(40) }];
    pending = [];
    history.push({ role: 'user', content: user });
    const headers = {
      'x-mektpoy-session': session,
      // The stand-in keys its state (its cache, its thinking signatures) by this header, else
      // by the API key: one per conversation, as the proxy keys by the one above.
      'x-mektpoy-test-session': session,
    };
    if (i % 3 === 2) headers['x-mektpoy-test-tool-use'] = 'read';
    const params = { model, max_tokens: 256, system: SYSTEM, tools: toolsAt(i), messages: [...history] };
    out.requests += 1;
    let message;
    let response;
    try {
      if (stream) {
        const s = client.messages.stream(params, { headers });
        ({ response } = await s.withResponse());
        message = await s.finalMessage();
      } else {
        ({ data: message, response } = await client.messages.create(params, { headers }).withResponse());
      }
    } catch (error) {
      if (!(error instanceof Anthropic.APIError)) throw error;
      out.refused += 1;
      // Direct refusals are expected (and shown once); through the proxy, none is.
      failures.record(label, i, error, seen, !expected || out.refused === 1);
      history.pop();
      pending = user.filter((b) => b.type === 'tool_result');
      continue;
    }
    out.cached += Number(response.headers.get(CACHED) ?? 0);
    out.total += Number(response.headers.get(TOTAL) ?? 0);
    const announced = canonical(JSON.parse(response.headers.get(CONTENT) ?? 'null'));
    const got = canonical(message.content);
    if (announced !== got) {
      out.mismatch += 1;
      console.error(
        `NOTE ${SDK} ${label} step ${i}: the SDK's content differs from the stand-in's: ${got.slice(0, 400)} vs ${announced.slice(0, 400)}`,
      );
    }
    pending = message.content
      .filter((b) => b.type === 'tool_use')
      .map((b) => ({ type: 'tool_result', tool_use_id: b.id, content: 'file contents' }));
    // Exactly what the SDK returned (thinking blocks included).
    history.push({ role: 'assistant', content: message.content });
  }
  return out;
}

async function main() {
  const a = args();
  const failures = new Failures(a.out);
  let proxiedFailures = 0;
  for (const [target, base, models] of [
    ['proxy', a.proxy, MODELS],
    ['direct', a.standin, DIRECT_MODELS],
  ]) {
    const seen = {};
    const client = new Anthropic({
      apiKey: 'sk-test',
      baseURL: base,
      maxRetries: 0,
      timeout: 60_000,
      fetch: recordingFetch(seen),
    });
    for (const model of models) {
      for (const mode of ['create', 'stream']) {
        const label = `${target}-${model}-${mode}`;
        const session = `${a.run}-${SDK}-${label}`;
        const before = failures.count;
        const start = performance.now();
        const r = await conversation(client, seen, session, model, mode === 'stream', failures, label, target === 'direct');
        if (target === 'proxy') proxiedFailures += failures.count - before;
        console.log(
          `RESULT sdk=${SDK} target=${target} model=${model} mode=${mode} requests=${r.requests} ` +
            `refused=${r.refused} cached_bytes=${r.cached} total_bytes=${r.total} ` +
            `content_mismatch=${r.mismatch} seconds=${((performance.now() - start) / 1000).toFixed(1)}`,
        );
      }
    }
  }
  return proxiedFailures ? 1 : 0;
}

process.exitCode = await main();
