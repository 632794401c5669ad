// A harness-like chat completions conversation through mektpoy-proxy with the official OpenAI
// TypeScript SDK (npm `openai`), the twin of harness_chat.py beside it (same steps, same churn,
// same output).
//
// Run by run.sh (which starts the stand-in and the proxy and installs the SDK):
//
//     MEKTPOY_NPM_DIR=DIR node harness_chat.mjs --proxy URL --standin URL --run ID --out DIR
//
// MEKTPOY_NPM_DIR is the folder whose node_modules holds the SDK (run.sh installs it under
// target/clients/npm). The client is `new OpenAI({baseURL: <URL>/v1, apiKey: 'sk-test'})` on
// deepseek-v4-pro; `create` sends the SDK's own assistant message back, `stream` (`stream: true`,
// `stream_options.include_usage`) rebuilds it (content and tool_calls) from the chunks. Prints one
// `RESULT` line per mode x target and exits 1 when a request through the proxy failed (each
// failure's exact request and response is written under --out). The direct runs (SDK ->
// stand-in) are informative.

import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const require = createRequire(join(resolve(process.env.MEKTPOY_NPM_DIR ?? '.'), 'package.json'));
const sdk = require('openai');
const OpenAI = sdk.OpenAI ?? sdk.default;

const SDK = 'typescript-openai';
const MODELS = ['deepseek-v4-pro'];
const STEPS = 12;
const CACHED = 'x-standin-cached-bytes';
const TOTAL = 'x-standin-total-bytes';
const CONTENT = 'x-standin-content';

const SYSTEM =
  'You are a coding agent. ' + 'rules '.repeat(300) +
  '\n\nEnvironment: a Rust workspace on Linux. ' + 'facts '.repeat(40);

const tool = (name, description) => ({
  type: 'function',
  function: { name, description, parameters: { type: 'object', properties: { arg: { type: 'string' } } } },
});

/** The harness's tool list at step i (0-based): the churn of a real session. */
function toolsAt(i) {
  let tools = [tool('read', 'Read a file'), tool('shell', 'Run a command')];
  if (!(i >= 5 && i <= 6)) tools.push(tool('lint', 'Lint the tree')); // off at 5, 6; back at 7
  if (i >= 3) tools.push(tool('mcp__gh__search', 'Search issues'), tool('mcp__gh__issue', 'Open an issue'));
  if (i >= 9) tools.reverse(); // the same tools, listed in another order
  if (i >= 10) for (const t of tools) if (t.function.name === 'read') t.function.description = 'Read a file (v2)';
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

/** JSON with sorted keys: a rebuilt message has the client's key order. */
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
    seen.response = { status: response.status, headers: Object.fromEntries(response.headers.entries()) };
    if (!response.ok) seen.response.body = jsonOrText(await response.clone().text());
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

/** The assistant message and the usage, from the chunks, as a client rebuilds them. */
async function rebuild(stream) {
  let role;
  let content = '';
  let usage;
  const calls = [];
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      const delta = choice.delta ?? {};
      if (delta.role) role = delta.role;
      if (delta.content) content += delta.content;
      for (const part of delta.tool_calls ?? []) {
        const call = (calls[part.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (part.id) call.id = part.id;
        if (part.type) call.type = part.type;
        if (part.function?.name) call.function.name += part.function.name;
        if (part.function?.arguments) call.function.arguments += part.function.arguments;
      }
    }
  }
  const message = { role: role ?? 'assistant', content: content || null };
  const made = calls.filter(Boolean);
  if (made.length) message.tool_calls = made;
  return { message, usage };
}

async function conversation(client, seen, session, model, stream, failures, label, expected) {
  let history = [{ role: 'system', content: SYSTEM }];
  let pending = []; // the tool messages answering the last answer's calls
  const out = { requests: 0, refused: 0, cached: 0, total: 0, mismatch: 0, usageCached: 0 };
  for (let i = 0; i < STEPS; i++) {
    if (i === 11) {
      // A compaction: the client replaces its history with a summary.
      history = [
        history[0],
        { role: 'user', content: 'Summary of the work so far: steps 0 to 10.' },
        { role: 'assistant', content: 'Understood.' },
      ];
      pending = [];
    }
    const turn = [...pending, { role: 'user', content: `step ${i}: go on. ` + 'context '.repeat(40) }];
    const headers = {
      'x-mektpoy-session': session,
      // The stand-in keys its state (its cache) by this header, else by the API key: one per
      // conversation, as the proxy keys by the one above.
      'x-mektpoy-test-session': session,
    };
    if (i % 3 === 2) headers['x-mektpoy-test-tool-use'] = 'read';
    const params = { model, max_tokens: 256, tools: toolsAt(i), messages: [...history, ...turn] };
    if (stream) Object.assign(params, { stream: true, stream_options: { include_usage: true } });
    out.requests += 1;
    let message;
    let usage;
    let response;
    try {
      const { data, response: r } = await client.chat.completions.create(params, { headers }).withResponse();
      response = r;
      if (stream) {
        ({ message, usage } = await rebuild(data));
      } else {
        // The SDK's own message object, sent back as is.
        message = data.choices[0].message;
        usage = data.usage;
      }
    } catch (error) {
      if (!(error instanceof OpenAI.APIError)) throw error;
      out.refused += 1;
      // Direct refusals are expected (and shown once); through the proxy, none is.
      failures.record(label, i, error, seen, !expected || out.refused === 1);
      pending = turn.slice(0, -1);
      continue;
    }
    out.cached += Number(response.headers.get(CACHED) ?? 0);
    out.total += Number(response.headers.get(TOTAL) ?? 0);
    out.usageCached += usage?.prompt_tokens_details?.cached_tokens ?? 0;
    const announced = canonical(JSON.parse(response.headers.get(CONTENT) ?? 'null'));
    const got = canonical(message);
    if (announced !== got) {
      out.mismatch += 1;
      console.error(
        `NOTE ${SDK} ${label} step ${i}: the SDK's message differs from the stand-in's: ${got.slice(0, 400)} vs ${announced.slice(0, 400)}`,
      );
    }
    history.push(...turn, message);
    pending = (message.tool_calls ?? []).map((c) => ({ role: 'tool', tool_call_id: c.id, content: 'file contents' }));
  }
  return out;
}

async function main() {
  const a = args();
  const failures = new Failures(a.out);
  let proxiedFailures = 0;
  for (const [target, base] of [
    ['proxy', a.proxy],
    ['direct', a.standin],
  ]) {
    const seen = {};
    const client = new OpenAI({
      apiKey: 'sk-test',
      baseURL: `${base}/v1`,
      maxRetries: 0,
      timeout: 60_000,
      fetch: recordingFetch(seen),
    });
    for (const model of MODELS) {
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
            `content_mismatch=${r.mismatch} usage_cached_tokens=${r.usageCached} ` +
            `seconds=${((performance.now() - start) / 1000).toFixed(1)}`,
        );
      }
    }
  }
  return proxiedFailures ? 1 : 0;
}

process.exitCode = await main();
