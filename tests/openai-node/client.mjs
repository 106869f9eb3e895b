// `fairkv serve` through the official OpenAI Node client: what an
// application written against OpenAI sees.  Starts the server (engine
// backend, the given GGUF model, a free loopback port) and always stops it.
//   node client.mjs FAIRKV_BINARY MODEL.gguf
// Chat completions are checked when the server has them; a 404 for the
// endpoint itself is reported as a skip, not a failure.
import { spawn } from 'node:child_process';
import OpenAI from 'openai';

const [bin, modelFile] = process.argv.slice(2);
const KEY = 'openai-node-test-key';
let failures = 0;
let server = null;

function check(cond, what, detail = '') {
  if (cond) console.log(`ok - ${what}`);
  else {
    failures++;
    console.log(`FAIL - ${what}${detail ? ': ' + detail : ''}`);
  }
}

// The server never outlives this script: not on an uncaught error, a
// signal (timeout's SIGTERM) or a closed stdout (EPIPE).
function killServer() {
  if (server && server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
}
process.on('exit', killServer);
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(sig, () => {
    console.log(`FAIL - ${sig} before the test ended`);
    process.exit(1);
  });
}
process.stdout.on('error', () => {});

function startServer() {
  return new Promise((resolve, reject) => {
    const args = ['serve', '--port', '0', '--model', modelFile, '--api-key', KEY,
      '--read-timeout', '5', '--max-connections-per-ip', '16'];
    server = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no banner from fairkv serve within 30 s: ${out}`)), 30000);
    server.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    server.stderr.on('data', (d) => process.stderr.write(`[serve] ${d}`));
    server.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`fairkv serve exited early (${code}): ${out}`));
    });
  });
}

// SIGTERM (the graceful drain), then SIGKILL if it hangs; the exit status.
function stopServer() {
  if (!server || server.exitCode !== null || server.signalCode !== null) {
    return Promise.resolve(server ? server.exitCode : null);
  }
  return new Promise((resolve) => {
    const kill = setTimeout(() => server.kill('SIGKILL'), 10000);
    server.removeAllListeners('exit');
    server.on('exit', (code) => {
      clearTimeout(kill);
      resolve(code);
    });
    server.kill('SIGTERM');
  });
}

// The thrown error of fn(), or null.
async function errorOf(fn) {
  try {
    await fn();
    return null;
  } catch (e) {
    return e;
  }
}

// A 404 for the endpoint itself (not for a model): the server has no such route.
function isMissingEndpoint(e) {
  return e instanceof OpenAI.NotFoundError && e.code !== 'model_not_found';
}

async function completions(client, model) {
  const prompt = 'Once upon a time';
  const whole = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0 });
  const c0 = whole.choices?.[0];
  check(whole.object === 'text_completion' && whole.choices.length === 1, 'completion: one choice',
    JSON.stringify(whole).slice(0, 300));
  check(typeof c0?.text === 'string' && c0.text.length > 0, 'completion: non-empty text', JSON.stringify(c0));
  check(['length', 'stop'].includes(c0?.finish_reason), 'completion: finish_reason', c0?.finish_reason);
  check(whole.usage?.prompt_tokens > 0 && whole.usage.completion_tokens > 0 && whole.usage.completion_tokens <= 24,
    'completion: usage', JSON.stringify(whole.usage));

  // streamed, greedy: the same text as the whole answer, then a usage chunk
  const stream = await client.completions.create({
    model, prompt, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let chunks = 0;
  let finish = null;
  let usage = null;
  for await (const ch of stream) {
    chunks++;
    for (const c of ch.choices ?? []) {
      text += c.text ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (ch.usage) usage = ch.usage;
  }
  check(chunks > 1, 'stream: several chunks', String(chunks));
  check(text === c0?.text, 'stream: the same text as the whole answer (greedy)',
    `${JSON.stringify(text)} vs ${JSON.stringify(c0?.text)}`);
  check(finish === c0?.finish_reason, 'stream: finish_reason', String(finish));
  check(usage?.completion_tokens === whole.usage?.completion_tokens, 'stream: usage chunk', JSON.stringify(usage));

  // n choices
  const many = await client.completions.create({ model, prompt, max_tokens: 8, n: 3, temperature: 1, seed: 7 });
  const idx = many.choices.map((c) => c.index).sort();
  check(many.choices.length === 3 && idx.join() === '0,1,2', 'n=3: three choices, indices 0..2', idx.join());
  check(many.choices.every((c) => typeof c.text === 'string'), 'n=3: every choice has text');

  // stop: a word of the greedy text ends the answer before it
  const full = c0?.text ?? '';
  const words = full.split(/\s+/).filter((w) => w.length >= 3);
  const stopWord = words[Math.floor(words.length / 2)];
  if (!stopWord) {
    check(false, 'stop: a word to stop at in the greedy text', JSON.stringify(full));
  } else {
    const cut = full.slice(0, full.indexOf(stopWord));
    const st = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stop: [stopWord] });
    const s0 = st.choices[0];
    if (s0.text === full && s0.finish_reason !== 'stop') {
      console.log(`SKIP - stop: the server ignores 'stop' (not implemented): got the whole text past ${JSON.stringify(stopWord)}`);
    } else {
      check(s0.text === cut && s0.finish_reason === 'stop', `stop ${JSON.stringify(stopWord)}: text ends before it`,
        `${JSON.stringify(s0.text)} (${s0.finish_reason}), want ${JSON.stringify(cut)}`);
    }
  }
}

async function errors(client, baseURL, model) {
  const nf = await errorOf(() => client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 1 }));
  check(nf instanceof OpenAI.NotFoundError && nf.status === 404, 'unknown model: NotFoundError 404',
    String(nf?.status) + ' ' + nf?.message);
  check(nf instanceof OpenAI.APIError && nf.code === 'model_not_found', 'unknown model: code model_not_found',
    String(nf?.code));
  const bad = await errorOf(() => client.completions.create({ model, prompt: 'x', max_tokens: 0 }));
  check(bad instanceof OpenAI.BadRequestError && bad.status === 400, 'max_tokens 0: BadRequestError 400',
    String(bad?.status));
  const other = new OpenAI({ apiKey: 'wrong-key', baseURL, maxRetries: 0 });
  const auth = await errorOf(() => other.models.list());
  check(auth instanceof OpenAI.AuthenticationError && auth.status === 401, 'wrong key: AuthenticationError 401',
    String(auth?.status));
}

async function chat(client, model) {
  const messages = [{ role: 'user', content: 'Tell me a story.' }];
  let res;
  const e = await errorOf(async () => {
    res = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
  });
  if (isMissingEndpoint(e)) {
    console.log('SKIP - chat: the server answers 404 for /v1/chat/completions (endpoint not there yet)');
    return;
  }
  check(!e, 'chat: answered', e && `${e.status} ${e.message}`);
  if (e) return;
  const m = res.choices?.[0]?.message;
  check(res.object === 'chat.completion' && m?.role === 'assistant', 'chat: an assistant message',
    JSON.stringify(res).slice(0, 300));
  check(typeof m?.content === 'string' && m.content.length > 0, 'chat: non-empty content', JSON.stringify(m));
  check(['length', 'stop'].includes(res.choices[0].finish_reason), 'chat: finish_reason', res.choices[0].finish_reason);

  const stream = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, stream: true });
  let text = '';
  let role = null;
  let finish = null;
  for await (const ch of stream) {
    const c = ch.choices?.[0];
    if (!c) continue;
    if (c.delta?.role) role = c.delta.role;
    text += c.delta?.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  check(role === 'assistant', 'chat stream: role in a delta', String(role));
  check(text === m.content, 'chat stream: the same content as the whole answer (greedy)',
    `${JSON.stringify(text)} vs ${JSON.stringify(m.content)}`);
  check(finish === res.choices[0].finish_reason, 'chat stream: finish_reason', String(finish));
}

// logprobs as the client types them; a field not implemented is a 400 naming it
async function logprobs(client, model) {
  const messages = [{ role: 'user', content: 'Tell me a story.' }];
  const res = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0,
    logprobs: true, top_logprobs: 3 });
  const c0 = res.choices?.[0];
  const content = c0?.logprobs?.content ?? [];
  check(content.length === res.usage?.completion_tokens, 'chat logprobs: one entry per token',
    `${content.length} vs ${res.usage?.completion_tokens}`);
  check(content.map((t) => t.token).join('') === c0?.message?.content, 'chat logprobs: the tokens spell the content',
    JSON.stringify(content.map((t) => t.token)));
  check(content.every((t) => t.logprob <= 0 && t.top_logprobs.length === 3 &&
      Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6),
    'chat logprobs: greedy takes the most likely of 3 alternatives', JSON.stringify(content[0]));
  const cmpl = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6, temperature: 0,
    logprobs: 2 });
  const lp = cmpl.choices?.[0]?.logprobs;
  check(lp?.tokens?.length === 6 && lp.token_logprobs.length === 6 && lp.top_logprobs.length === 6 &&
      lp.text_offset.length === 6 && lp.tokens.join('') === cmpl.choices[0].text,
    'completion logprobs: legacy format', JSON.stringify(lp).slice(0, 300));
  const refused = await errorOf(() => client.chat.completions.create({ model, messages, max_tokens: 4,
    response_format: { type: 'json_object' } }));
  check(refused instanceof OpenAI.BadRequestError && refused.param === 'response_format',
    'response_format json_object: 400 naming it', `${refused?.status} ${refused?.param} ${refused?.message}`);
}

async function main() {
  const watchdog = setTimeout(async () => {
    console.log('FAIL - the test took longer than 120 s');
    await stopServer();
    process.exit(1);
  }, 120000);
  try {
    const port = await startServer();
    const baseURL = `http://127.0.0.1:${port}/v1`;
    const client = new OpenAI({ apiKey: KEY, baseURL, maxRetries: 0, timeout: 60000 });
    const models = await client.models.list();
    const model = models.data?.[0]?.id;
    check(typeof model === 'string' && model.length > 0, 'models.list: the served model', JSON.stringify(models.data));
    await completions(client, model);
    await errors(client, baseURL, model);
    await chat(client, model);
    await logprobs(client, model);
  } catch (e) {
    check(false, 'no unexpected error', e?.stack ?? String(e));
  } finally {
    const code = await stopServer();
    check(code === 0, 'fairkv serve exits 0 on SIGTERM', String(code));
    clearTimeout(watchdog);
  }
  console.log(failures ? `${failures} failed` : 'all passed');
  process.exit(failures ? 1 : 0);
}

main();
