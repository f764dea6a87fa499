// sdk-client.mjs - drives `sandboxctl mcp` with the official MCP TypeScript
// SDK client and calls every tool once, checking each answer.  Prints
// "ok - ..." / "not ok - ..." lines (tests/mcp/lib.sh numbers them).
//
//   node sdk-client.mjs stdio CMD [ARGS...]
//   node sdk-client.mjs http URL TOKEN_FILE
//
// Environment: MCP_NODE_MODULES (where the SDK is installed), MCP_SANDBOX
// (name of the sandbox to create), MCP_PRESETS (the permitted presets,
// comma-separated; the first is used), MCP_DENIED_PRESET (one that is not
// permitted), MCP_SIZE (default small), MCP_PROGRESS (steps: create_server
// must send notifications/progress for each create step),
// MCP_SECRETS (the permitted secrets, comma-separated; unset: none, and
// create_server must not offer any), MCP_DENIED_SECRET (one that is not)
// and MCP_RUN_SECONDS (run_command's progress is checked with `sleep N`,
// which must tick; unset: with echo, whose fake reports a tick itself).
//
// Beyond tools: log messages at the level set, resources (list, templates,
// read, an update after extend_server of a subscribed sandbox), prompts and
// completion; over HTTP the notifications come on the POST's event stream
// and, for the update, on the session's GET stream.
import { check, done, sdk, transportFor } from './sdk-lib.mjs';

const { Client } = await sdk('client/index.js');
const { LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema } = await sdk('types.js');

const name = process.env.MCP_SANDBOX || 'mcp-sdk-test';
const presets = (process.env.MCP_PRESETS || 'balanced').split(',');
const denied = process.env.MCP_DENIED_PRESET || 'open';
const size = process.env.MCP_SIZE || 'small';
const secrets = process.env.MCP_SECRETS ? process.env.MCP_SECRETS.split(',') : [];
const deniedSecret = process.env.MCP_DENIED_SECRET || 'not-permitted';
const expectedTools = [
  'create_server', 'list_servers', 'run_command', 'read_file', 'write_file', 'extend_server',
  'destroy_server', 'snapshot_server', 'rollback_server', 'list_snapshots',
  // the real server also offers request_access (tests/mcp/access.t drives it)
  ...(process.env.MCP_EXTRA_TOOLS ? process.env.MCP_EXTRA_TOOLS.split(',') : []),
];

// Calls a tool; a thrown error becomes {thrown}.  With onprogress the SDK
// sends a progressToken and hands each notifications/progress to it.
async function call(client, tool, args, timeout = 120000, onprogress = undefined) {
  try {
    return await client.callTool({ name: tool, arguments: args }, undefined,
      onprogress ? { timeout, onprogress } : { timeout });
  } catch (e) {
    return { thrown: e };
  }
}
const sc = (r) => r.structuredContent || {};
const text = (r) => (r.content && r.content[0] && r.content[0].text) || '';
const good = (r) => !r.thrown && r.isError === false;

const [mode, ...rest] = process.argv.slice(2);
if (mode !== 'stdio' && mode !== 'http') {
  console.error('usage: sdk-client.mjs stdio CMD [ARGS...] | http URL TOKEN_FILE');
  process.exit(2);
}
const transport = transportFor(mode, rest);

const client = new Client({ name: 'egressd-tests', version: '1.0.0' });
try {
  await client.connect(transport);
  check(true, `${mode}: initialize handshake with the SDK client`);
} catch (e) {
  check(false, `${mode}: initialize handshake with the SDK client`, String(e));
  process.exit(1);
}
const logs = [];
const updates = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params.uri));
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
// Waits up to ms for cond() (notification handlers run a little later).
async function until(cond, ms = 3000) {
  for (let t = 0; t < ms && !cond(); t += 50) await sleep(50);
  return cond();
}
const info = client.getServerVersion();
check(info && info.name === 'sandboxctl', `${mode}: serverInfo names sandboxctl`, info);
check(client.getServerCapabilities()?.tools !== undefined, `${mode}: tools capability declared`);
const caps = client.getServerCapabilities() || {};
check(caps.logging && caps.prompts && caps.completions && caps.resources?.subscribe === true &&
  caps.resources?.listChanged === true,
`${mode}: logging, prompts, completions and resources (subscribe, listChanged) declared`, caps);
try {
  await client.setLoggingLevel('info');
  check(true, `${mode}: logging/setLevel info`);
} catch (e) {
  check(false, `${mode}: logging/setLevel info`, String(e));
}
if (mode === 'http') {
  check(transport.protocolVersion === '2025-11-25', 'http: protocol version 2025-11-25 negotiated',
    transport.protocolVersion);
  check(typeof transport.sessionId === 'string' && transport.sessionId.length >= 32,
    'http: the server issued an Mcp-Session-Id');
}

const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
check(JSON.stringify(names) === JSON.stringify(expectedTools), `${mode}: tools/list has every tool`,
  names);
const create = tools.find((t) => t.name === 'create_server');
check(JSON.stringify(create?.inputSchema?.properties?.policy?.enum) === JSON.stringify(presets),
  `${mode}: create_server's policy enum is the configured mcp-presets`, create?.inputSchema);

const secretsSchema = create?.inputSchema?.properties?.secrets;
if (secrets.length) {
  check(secretsSchema?.type === 'array' &&
    JSON.stringify(secretsSchema?.items?.enum) === JSON.stringify(secrets),
  `${mode}: create_server's secrets are an array of the configured mcp-secrets`, secretsSchema);
} else {
  check(secretsSchema === undefined, `${mode}: without mcp-secrets create_server offers no secrets`,
    secretsSchema);
}

let r = await call(client, 'create_server', { name, size, lifetime: '1h', policy: denied });
check(!r.thrown && r.isError === true && text(r).includes('not a preset permitted'),
  `${mode}: create_server with preset '${denied}' (not permitted) is a tool error`, r);
r = await call(client, 'create_server',
  { name, size, lifetime: '1h', policy: presets[0], secrets: [deniedSecret] });
check(!r.thrown && r.isError === true &&
  text(r).includes(secrets.length ? `"${deniedSecret}" is not a secret permitted over MCP; the administrator permits: ${secrets.join(', ')}`
    : 'no secret is permitted over MCP'),
`${mode}: create_server with secret '${deniedSecret}' (not permitted) is a tool error naming the permitted ones`, r);

const progress = [];
r = await call(client, 'create_server', { name, size, lifetime: '1h', policy: presets[0] }, 120000,
  (p) => progress.push(p));
check(good(r) && sc(r).name === name && typeof sc(r).expires === 'string',
  `${mode}: create_server makes ${name} (structuredContent passes the outputSchema)`, r);
// Progress (MCP_PROGRESS=steps: the real server): a start and an end per
// step, in order, values growing to the total, over stdio and over HTTP
// (the POST's event stream); none from a server whose create reports no
// steps (mcp_fake_server).
const steps = ['clone', 'configure', 'firewall', 'start', 'guest agent', 'guest setup', 'binding'];
const wantMsgs = steps.flatMap((s) => [`${s}: started`, `${s}: done in`]);
if (process.env.MCP_PROGRESS === 'steps') {
  // The SDK runs notification handlers a microtask later but a response's
  // at once, and the response drops the request's progress handler: the
  // last notification, written just before the result, is lost when both
  // come in one read.  (tests/mcp/sandboxctl.t reads the raw stream and
  // checks that every one is sent.)  So: every step but at most the last
  // notification, in order.
  check(progress.length >= wantMsgs.length - 1 && progress.length <= wantMsgs.length &&
    progress.every((p, i) => p.message.startsWith(wantMsgs[i]) && /\(\d+\.\d s so far\)$/.test(p.message) &&
      p.progress === i + 1 && p.total === wantMsgs.length),
  `${mode}: create_server sent notifications/progress for every step, in order, with seconds`,
  progress);
} else {
  check(progress.length === 0, `${mode}: no notifications/progress (create reports no steps)`,
    progress);
}
await until(() => logs.some((l) => l.data.startsWith('create_server done')));
check(logs.some((l) => l.level === 'info' && l.logger === 'sandboxctl' &&
  l.data === 'create_server started') &&
  logs.some((l) => l.level === 'info' && l.data.startsWith('create_server done after')) &&
  !logs.some((l) => l.level === 'debug'),
`${mode}: log messages at info: create_server started and done, no debug steps`, logs);

// Resources.
const infoUri = `sandbox://${name}/info`;
try {
  const { resources } = await client.listResources();
  check(resources.some((x) => x.uri === infoUri && x.mimeType === 'application/json'),
    `${mode}: resources/list has ${infoUri}`, resources);
  const { resourceTemplates } = await client.listResourceTemplates();
  check(resourceTemplates.some((x) => x.uriTemplate === 'sandbox://{name}/info'),
    `${mode}: resources/templates/list has sandbox://{name}/info`, resourceTemplates);
  const rd = await client.readResource({ uri: infoUri });
  const entry = JSON.parse(rd.contents[0].text);
  check(rd.contents[0].uri === infoUri && entry.name === name && typeof entry.owner === 'string',
    `${mode}: resources/read ${infoUri}: its list entry as JSON`, rd);
  await client.subscribeResource({ uri: infoUri });
  check(true, `${mode}: resources/subscribe ${infoUri}`);
} catch (e) {
  check(false, `${mode}: resources list, templates, read and subscribe`, String(e));
}
try {
  await client.readResource({ uri: 'sandbox://no-such-sandbox/info' });
  check(false, `${mode}: resources/read of an unknown sandbox: -32002`);
} catch (e) {
  check(e.code === -32002, `${mode}: resources/read of an unknown sandbox: -32002`, String(e));
}

// Prompts and completion.
try {
  const { prompts } = await client.listPrompts();
  check(prompts.map((x) => x.name).join() === 'sandbox_task,review_changes',
    `${mode}: prompts/list: sandbox_task, review_changes`, prompts);
  const pr = await client.getPrompt({ name: 'sandbox_task',
    arguments: { task: 'count the primes below 100', policy: presets[presets.length - 1] } });
  const ptext = pr.messages[0].content.text;
  check(ptext.includes('count the primes below 100') &&
    ptext.includes(`policy "${presets[presets.length - 1]}"`),
  `${mode}: prompts/get sandbox_task fills in the task and the policy`, pr);
  const last = presets[presets.length - 1];
  const cp = await client.complete({ ref: { type: 'ref/prompt', name: 'sandbox_task' },
    argument: { name: 'policy', value: last.slice(0, 2) } });
  check(cp.completion.values.includes(last) &&
    cp.completion.values.every((v) => v.startsWith(last.slice(0, 2))),
  `${mode}: completion/complete of sandbox_task's policy '${last.slice(0, 2)}'`, cp);
  const cs = await client.complete({ ref: { type: 'ref/prompt', name: 'sandbox_task' },
    argument: { name: 'size', value: size.slice(0, 2) } });
  check(cs.completion.values.includes(size) &&
    cs.completion.values.every((v) => v.startsWith(size.slice(0, 2))),
  `${mode}: completion/complete of sandbox_task's size '${size.slice(0, 2)}' gives ${size}`, cs);
  const cn = await client.complete({ ref: { type: 'ref/resource', uri: 'sandbox://{name}/info' },
    argument: { name: 'name', value: name.slice(0, 4) } });
  check(cn.completion.values.includes(name),
    `${mode}: completion/complete of the template's {name} '${name.slice(0, 4)}' gives ${name}`, cn);
} catch (e) {
  check(false, `${mode}: prompts and completion`, String(e));
}
try {
  await client.getPrompt({ name: 'sandbox_task', arguments: {} });
  check(false, `${mode}: prompts/get without the required task: -32602`);
} catch (e) {
  check(e.code === -32602, `${mode}: prompts/get without the required task: -32602`, String(e));
}

r = await call(client, 'list_servers', {});
check(good(r) && sc(r).sandboxes.some((s) => s.name === name),
  `${mode}: list_servers shows ${name}`, r);

r = await call(client, 'run_command', { name, command: ['echo', 'hello', '42'] });
check(good(r) && sc(r).exitcode === 0 && sc(r).stdout === 'hello 42\n',
  `${mode}: run_command echo: exit 0 and its output`, r);
const runProgress = [];
const secs = process.env.MCP_RUN_SECONDS;
r = await call(client, 'run_command', { name, command: secs ? ['sleep', secs] : ['echo', 'p'] },
  120000, (p) => runProgress.push(p));
// As above, the last notification (the end) may be lost to the SDK; over
// stdio the fake's three, written at once with the result, all are (the
// unit tests and tests/mcp/sse.py check them), so there only a real
// command that runs for seconds is checked.
if (secs || mode === 'http') {
  check(good(r) && runProgress.length >= 2 && runProgress[0].message.startsWith('run: started') &&
  /^run: running for \d+\.\d s/.test(runProgress[1].message) &&
  runProgress.every((p, i) => p.progress === i + 1 && p.total === undefined),
  `${mode}: run_command with a progress token: "run" started, then running for N s`, runProgress);
} else {
  check(good(r), `${mode}: run_command with a progress token`, r);
}
r = await call(client, 'run_command', { name, command: ['false'] });
check(good(r) && sc(r).exitcode === 1, `${mode}: run_command false: exit code 1, not a tool error`, r);
r = await call(client, 'run_command', { name });
check(!r.thrown && r.isError === true && text(r).includes('command'),
  `${mode}: run_command without command: a tool error naming it`, r);

const body = 'line one\nünïcode ✓\n';
r = await call(client, 'write_file', { name, path: '/tmp/mcp-test.txt', content: body });
check(good(r), `${mode}: write_file of text`, r);
r = await call(client, 'read_file', { name, path: '/tmp/mcp-test.txt' });
check(good(r) && sc(r).content === body &&
  Buffer.from(sc(r).content_base64, 'base64').toString('utf8') === body,
  `${mode}: read_file gives the text back, as text and as base64`, r);
const bin = Buffer.from([0, 255, 1, 128, 10]).toString('base64');
r = await call(client, 'write_file', { name, path: '/tmp/mcp-test.bin', content_base64: bin });
check(good(r), `${mode}: write_file of binary bytes (base64)`, r);
r = await call(client, 'read_file', { name, path: '/tmp/mcp-test.bin' });
check(good(r) && sc(r).content_base64 === bin && sc(r).content === undefined,
  `${mode}: read_file of binary bytes: base64 only, same bytes`, r);

r = await call(client, 'snapshot_server', { name, label: 'before' });
check(good(r) && sc(r).label === 'before', `${mode}: snapshot_server 'before'`, r);
r = await call(client, 'list_snapshots', { name });
check(good(r) && sc(r).snapshots.some((s) => s.label === 'before'),
  `${mode}: list_snapshots shows 'before'`, r);
r = await call(client, 'rollback_server', { name, label: 'before' });
check(good(r) && sc(r).label === 'before', `${mode}: rollback_server to 'before'`, r);
r = await call(client, 'rollback_server', { name, label: 'no-such-snapshot' });
check(!r.thrown && r.isError === true, `${mode}: rollback_server to a missing snapshot: tool error`, r);

updates.length = 0;
r = await call(client, 'extend_server', { name, duration: '1h' });
check(good(r) && typeof sc(r).expires === 'string', `${mode}: extend_server by 1h`, r);
check(await until(() => updates.includes(infoUri)),
  `${mode}: notifications/resources/updated for the subscribed ${infoUri} after extend_server` +
  (mode === 'http' ? ' (on the GET stream)' : ''), updates);

r = await call(client, 'destroy_server', { name });
check(good(r) && sc(r).destroyed === true, `${mode}: destroy_server`, r);
r = await call(client, 'list_servers', {});
check(good(r) && !sc(r).sandboxes.some((s) => s.name === name),
  `${mode}: list_servers no longer shows ${name}`, r);
r = await call(client, 'run_command', { name, command: ['true'] });
check(!r.thrown && r.isError === true, `${mode}: run_command in a destroyed sandbox: tool error`, r);

r = await call(client, 'no_such_tool', {});
check(r.thrown && r.thrown.code === -32602, `${mode}: unknown tool: JSON-RPC error -32602`,
  String(r.thrown));

try {
  const p = await client.ping();
  check(p && Object.keys(p).length === 0, `${mode}: ping answers {}`, p);
} catch (e) {
  check(false, `${mode}: ping answers {}`, String(e));
}
if (mode === 'http') {
  try {
    await transport.terminateSession();
    check(transport.sessionId === undefined, 'http: DELETE ends the session');
  } catch (e) {
    check(false, 'http: DELETE ends the session', String(e));
  }
}
await client.close();
done();
