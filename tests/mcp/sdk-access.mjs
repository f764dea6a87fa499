// sdk-access.mjs - the official MCP SDK client asks for access the way an
// assistant would: its sandbox is refused b.test, it reads what was refused
// (resource sandbox://NAME/denials), calls request_access, and the server
// asks the human (elicitation/create) for a host of access-owner-approves;
// the answer is applied.  Hosts of access-auto are granted without a
// question, every other host waits for an administrator.  A second client
// without the elicitation capability is never asked.  Prints "ok - ..."
// lines (tests/mcp/lib.sh numbers them).
//
//   node sdk-access.mjs stdio NAME CMD [ARGS...]
//   node sdk-access.mjs http NAME URL TOKEN_FILE
// Environment: MCP_NODE_MODULES, MCP_PROXY (egressd's proxy, ADDR:PORT).
import { execFileSync } from 'node:child_process';

import { check, done, sdk, transportFor } from './sdk-lib.mjs';

const { Client } = await sdk('client/index.js');
const { ElicitRequestSchema } = await sdk('types.js');

const [mode, name, ...rest] = process.argv.slice(2);
const transport = () => transportFor(mode, rest);

// The status of GET http://HOST:8000/ from the sandbox's address through egressd.
function via(addr, host) {
  try {
    return execFileSync('curl', ['-q', '-sS', '-m', '10', '--interface', addr, '-x',
      `http://${process.env.MCP_PROXY}`, '-o', '/dev/null', '-w', '%{http_code}',
      `http://${host}:8000/`], { encoding: 'utf8' });
  } catch (e) {
    return e.stdout || '000';
  }
}

const client = new Client({ name: 'egressd-access', version: '1.0.0' },
  { capabilities: { elicitation: {} } });
const asked = [];
let answer = { action: 'accept', content: { approve: true } };
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params);
  return answer;
});
await client.connect(transport());
const call = (tool, args) => client.callTool({ name: tool, arguments: args });

// MCP_RECHECK: the administrator has since taken .owner.test out of
// access-owner-approves; the owner's yes to the request left pending must
// not approve it (the operation checks the host again).
if (process.env.MCP_RECHECK) {
  const r = await call('request_access', { name, host: 'y.owner.test:443', why: 'and another' });
  check(asked.length === 1 && r.structuredContent?.status === 'pending' &&
    r.structuredContent?.note === "the owner's answer could not be applied; it waits",
  `${mode}: the pattern gone, the owner's yes no longer approves y.owner.test: it waits`, r);
  await client.close();
  done();
}

const tools = await client.listTools();
const ra = tools.tools.find((t) => t.name === 'request_access');
check(ra && ra.inputSchema.required.includes('why') && ra.inputSchema.properties.host,
  `${mode}: request_access is offered, with host and why required`, ra);
check(ra && ra.inputSchema.properties.methods?.type === 'string' &&
  ra.inputSchema.properties.paths?.type === 'string' && ra.inputSchema.properties.whole_host?.type === 'boolean',
  `${mode}: and with methods, paths and whole_host to say what requests it needs`, ra);

let r = await call('create_server', { name, size: 'small', policy: 'p' });
check(r.isError === false, `${mode}: create_server ${name} (policy p)`, r);
const addr = r.structuredContent?.address;
check(via(addr, 'b.test') === '403', `${mode}: ${name} (${addr}) is refused b.test (403)`);

// What was refused, as the assistant reads it.
const den = await client.readResource({ uri: `sandbox://${name}/denials` });
let d = [];
try { d = JSON.parse(den.contents[0].text).denials; } catch (e) { /* checked below */ }
check(d.some((x) => x.host === 'b.test' && x.port === 8000 && x.reason === 'not_allowed' &&
  typeof x.hint === 'string' && x.hint.includes('request_access')),
`${mode}: sandbox://${name}/denials lists b.test:8000 not_allowed, with a hint to ask`, den);

// A host the owner may approve: the human is asked and says yes.
r = await call('request_access', { name, host: 'b.test:8000', why: 'the crate mirror for the build', duration: '30m' });
check(asked.length === 1 && asked[0].message.includes('b.test:8000') &&
  asked[0].message.includes('the crate mirror for the build') && asked[0].message.includes('30m') &&
  asked[0].requestedSchema?.properties?.approve?.type === 'boolean',
`${mode}: request_access b.test:8000 asks the human (elicitation/create) with host, reason and time`, asked);
check(r.structuredContent?.methods === 'GET' && r.structuredContent?.paths === '/' &&
  r.structuredContent?.asked === 'b.test:8000' && r.structuredContent?.denial?.path === '/',
`${mode}: naming no methods or paths, it is narrowed to the denied request (GET /)`, r);
check(asked.length === 1 && asked[0].message.includes('It adds the rule "b.test:8000 methods GET paths / until ') &&
  /it would let [1-9][0-9]* pass: GET b\.test:8000\//.test(asked[0].message),
`${mode}: the human is shown what approving changes: the rule, and the denied GET it lifts`, asked);
check(r.isError === false && r.structuredContent?.status === 'approved' && r.structuredContent?.by === 'owner' &&
  typeof r.structuredContent?.until === 'string' && r.structuredContent?.note === 'approved by the owner',
`${mode}: the owner's yes approves it (by owner, until ...)`, r);
check(via(addr, 'b.test') === '200', `${mode}: ${name} reaches b.test now (200)`);
r = await call('list_servers', {});
const me = (r.structuredContent?.sandboxes || []).find((s) => s.name === name);
check(me && (me.grants || []).some((g) => g.host === 'b.test:8000'),
  `${mode}: list_servers shows the grant`, me);

// Not the owner's to approve: nobody is asked, an administrator decides.
r = await call('request_access', { name, host: 'a.test:9999', why: 'a port the preset lacks' });
check(asked.length === 1 && r.isError === false && r.structuredContent?.status === 'pending' &&
  r.structuredContent?.owner_may_approve === false &&
  r.structuredContent?.next?.includes('sandboxctl access approve'),
`${mode}: a.test:9999 (not in access-owner-approves): pending, nobody asked, the admin decides`, r);

// The owner says no: the request is denied.
answer = { action: 'accept', content: { approve: false } };
r = await call('request_access', { name, host: 'x.owner.test:443', why: 'an owner-approvable host' });
check(asked.length === 2 && r.structuredContent?.status === 'denied' && r.structuredContent?.by === 'owner',
  `${mode}: the owner answers approve=false: denied by the owner`, r);
answer = { action: 'decline' };
r = await call('request_access', { name, host: 'w.owner.test:443', why: 'another one' });
check(asked.length === 3 && r.structuredContent?.status === 'denied',
  `${mode}: the owner declines the form: denied`, r);
answer = { action: 'cancel' };
r = await call('request_access', { name, host: 'y.owner.test:443', why: 'and another' });
check(asked.length === 4 && r.structuredContent?.status === 'pending' &&
  r.structuredContent?.note === 'the owner did not decide; it waits',
`${mode}: the owner cancels: it stays pending`, r);

// access-auto: granted without a question.
r = await call('request_access', { name, host: 'pkg.auto.test:443', why: 'the package registry' });
check(asked.length === 4 && r.structuredContent?.status === 'approved' &&
  r.structuredContent?.by === 'access-auto .auto.test:443',
`${mode}: pkg.auto.test:443 (access-auto .auto.test:443): approved at once, nobody asked`, r);

// Bad input is the tool's error, with the reason.
r = await call('request_access', { name, host: '10.0.0.1:22', why: 'an address' });
check(r.isError === true && r.content[0].text.includes('host: expected HOST'),
  `${mode}: an address as host: a tool error naming host`, r);
r = await call('request_access', { name, host: 'z.owner.test', why: 'x', duration: '99h' });
check(r.isError === true && r.content[0].text.includes('access-max'),
  `${mode}: longer than access-max: a tool error naming it`, r);

// A client that cannot elicit is never asked; the request waits.
const plain = new Client({ name: 'egressd-plain', version: '1.0.0' }, { capabilities: {} });
await plain.connect(transport());
r = await plain.callTool({ name: 'request_access', arguments: { name, host: 'v.owner.test:443', why: 'no form' } });
check(asked.length === 4 && r.structuredContent?.status === 'pending' &&
  r.structuredContent?.note === 'the owner could not be asked; it waits',
`${mode}: a client without elicitation: pending, the owner could not be asked`, r);
await plain.close();

if (!process.env.MCP_KEEP) {
  r = await call('destroy_server', { name });
  check(r.isError === false, `${mode}: destroy_server ${name}`, r);
}
await client.close();
done();
